"""JSON columns whose nested in-place edits are saved (known fault 21).

`MutableList`/`MutableDict` only see changes to the top-level container: `row.notes[0]["text"] =
"…"` would be lost. Here every nested dict or list is replaced by a tracked copy that tells the
top-level container (and so SQLAlchemy) when it changes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, SupportsIndex

from sqlalchemy import JSON, Column
from sqlalchemy.ext.mutable import Mutable, MutableDict, MutableList


def _track(value: Any, root: Mutable) -> Any:
    """`value` with every dict/list inside replaced by a tracked copy reporting to `root`."""
    if isinstance(value, dict) and not isinstance(value, (TrackedDict, MutableDict)):
        return TrackedDict(root, value)
    if isinstance(value, list) and not isinstance(value, (TrackedList, MutableList)):
        return TrackedList(root, value)
    return value


class TrackedDict(dict[str, Any]):
    """A nested JSON object that reports edits to its top-level column value."""

    def __init__(self, root: Mutable, items: dict[str, Any]) -> None:
        super().__init__({k: _track(v, root) for k, v in items.items()})
        self._root = root

    def __reduce_ex__(self, protocol: Any) -> Any:
        # Copies and pickles are plain dicts: they are no longer part of a row.
        return (dict, (dict(self),))

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, _track(value, self._root))
        self._root.changed()

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._root.changed()

    def update(self, *args: Any, **kwargs: Any) -> None:
        """dict.update that reports the change."""
        for key, value in dict(*args, **kwargs).items():
            super().__setitem__(key, _track(value, self._root))
        self._root.changed()

    def setdefault(self, key: str, default: Any = None) -> Any:
        """dict.setdefault that reports the change."""
        if key not in self:
            self[key] = default
        return self[key]

    def pop(self, key: str, *default: Any) -> Any:
        """dict.pop that reports the change."""
        result = super().pop(key, *default)
        self._root.changed()
        return result

    def popitem(self) -> tuple[str, Any]:
        """dict.popitem that reports the change."""
        result = super().popitem()
        self._root.changed()
        return result

    def clear(self) -> None:
        """dict.clear that reports the change."""
        super().clear()
        self._root.changed()


class TrackedList(list[Any]):
    """A nested JSON array that reports edits to its top-level column value."""

    def __init__(self, root: Mutable, items: Iterable[Any]) -> None:
        super().__init__(_track(v, root) for v in items)
        self._root = root

    def __reduce_ex__(self, protocol: Any) -> Any:
        # Copies and pickles are plain lists: they are no longer part of a row.
        return (list, (list(self),))

    def __setitem__(self, index: Any, value: Any) -> None:
        tracked = (
            [_track(v, self._root) for v in value] if isinstance(index, slice) else _track(value, self._root)
        )
        super().__setitem__(index, tracked)
        self._root.changed()

    def __delitem__(self, index: Any) -> None:
        super().__delitem__(index)
        self._root.changed()

    def __iadd__(self, values: Iterable[Any]) -> TrackedList:  # type: ignore[misc]
        self.extend(values)
        return self

    def append(self, value: Any) -> None:
        """list.append that reports the change."""
        super().append(_track(value, self._root))
        self._root.changed()

    def extend(self, values: Iterable[Any]) -> None:
        """list.extend that reports the change."""
        super().extend(_track(v, self._root) for v in values)
        self._root.changed()

    def insert(self, index: SupportsIndex, value: Any) -> None:
        """list.insert that reports the change."""
        super().insert(index, _track(value, self._root))
        self._root.changed()

    def pop(self, index: SupportsIndex = -1) -> Any:
        """list.pop that reports the change."""
        result = super().pop(index)
        self._root.changed()
        return result

    def remove(self, value: Any) -> None:
        """list.remove that reports the change."""
        super().remove(value)
        self._root.changed()

    def clear(self) -> None:
        """list.clear that reports the change."""
        super().clear()
        self._root.changed()

    def sort(self, **kwargs: Any) -> None:
        """list.sort that reports the change."""
        super().sort(**kwargs)
        self._root.changed()

    def reverse(self) -> None:
        """list.reverse that reports the change."""
        super().reverse()
        self._root.changed()


class DeepMutableList(MutableList[Any]):
    """A top-level JSON array column value whose nested dicts and lists are tracked too."""

    def __init__(self, items: Iterable[Any] = ()) -> None:
        super().__init__()
        list.extend(self, (_track(v, self) for v in items))

    def __setitem__(self, index: Any, value: Any) -> None:
        tracked = [_track(v, self) for v in value] if isinstance(index, slice) else _track(value, self)
        super().__setitem__(index, tracked)

    def append(self, x: Any) -> None:
        """list.append that reports the change."""
        super().append(_track(x, self))

    def extend(self, x: Iterable[Any]) -> None:
        """list.extend that reports the change."""
        super().extend([_track(v, self) for v in x])

    def insert(self, i: SupportsIndex, x: Any) -> None:
        """list.insert that reports the change."""
        super().insert(i, _track(x, self))

    @classmethod
    def coerce(cls, key: str, value: Any) -> DeepMutableList | None:
        """Plain lists (from the database or assigned by code) become tracked."""
        if isinstance(value, cls) or value is None:
            return value
        if isinstance(value, list):
            return cls(value)
        return Mutable.coerce(key, value)


def deep_json_list_column(**kwargs: Any) -> Column[Any]:
    """A JSON array column whose in-place edits are saved at any depth (`row.notes[0]["text"] = …`)."""
    return Column(DeepMutableList.as_mutable(JSON()), **kwargs)
