"""Gold chunk ids that name a deleted chunk: no index returns it, so a case labelled with it can
never find its gold (diagnosis calls that a `label_error`). `label` refuses them like unknown ids."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.engine import Engine

from ragtriage.eval.doctor import best_overlap
from ragtriage.kb.service import get_chunks
from ragtriage.store.eval_repo import gold_rows, live_chunk_texts
from ragtriage.store.kb_tables import deletion_kind, filtered_reason

__all__ = ["DeletedGold", "deleted_gold", "describe", "unretrievable_gold"]

_DELETED = "deleted"
_REMOVED = "removed"
_FILTERED = "filtered"


@dataclass(frozen=True)
class DeletedGold:
    """One gold id whose chunk is deleted, and where its content may live now."""

    chunk_id: str
    doc_id: str
    document_live: bool
    replacement: str | None
    """The live chunk of the same document closest in content, when the document was re-chunked."""
    deletion: str | None = None
    """The stored reason (`kb_chunk.deletion`): `rechunked`, `removed`, `filtered: …` (an imported
    row the status filter left out), or None when the chunk was deleted before the store recorded
    reasons."""

    @property
    def kind(self) -> str | None:
        """The stored reason's code: `rechunked`, `removed`, `filtered`, or None (not recorded)."""
        return deletion_kind(self.deletion)

    @property
    def filtered(self) -> str | None:
        """Why the import's status filter left the row out (`not published (status=DRAFT)`), if it did."""
        return filtered_reason(self.deletion)

    @property
    def reason(self) -> str:
        """Why the chunk cannot be gold, e.g. `chunk X is deleted (document 7 was re-chunked)`."""
        if self.filtered is not None:
            why = f"{self.filtered} when imported"
        elif not self.document_live:
            why = f"its document {self.doc_id} was deleted"
        elif self.replacement is not None:
            why = f"document {self.doc_id} was re-chunked"
        else:
            why = f"removed from document {self.doc_id}, which is live"
        return f"chunk {self.chunk_id} is deleted in the KB ({why}), so no index returns it"

    @property
    def fix(self) -> str:
        """What to label instead."""
        if not self.document_live:
            return (
                "pick a chunk of a live document (`ragtriage kb chunks`), or label the case without "
                "gold if the KB no longer answers it"
            )
        pick = (
            f"pick the current chunk of document {self.doc_id} that answers the query "
            f"(`ragtriage kb chunks --doc {self.doc_id}`, then `ragtriage kb show CHUNK_ID`)"
        )
        if self.replacement is not None:
            closest = self.replacement
            return f"the closest current chunk is {closest} (`ragtriage kb show {closest}`); or {pick}"
        if self.filtered is not None:
            return f"{pick}; or publish it at the source and run `ragtriage kb import` again"
        return pick


def deleted_gold(engine: Engine, chunk_ids: Sequence[str]) -> list[DeletedGold]:
    """The ids among `chunk_ids` whose chunk the KB holds as deleted, in the given order
    (unknown and live ids are left out)."""
    wanted = list(dict.fromkeys(chunk_ids))
    chunks, documents = gold_rows(engine, wanted)
    found: list[DeletedGold] = []
    for chunk_id in wanted:
        row = chunks.get(chunk_id)
        if row is None or row.status != _DELETED:
            continue
        document = documents.get(row.doc_id)
        live = document is not None and document.status != _DELETED
        replacement = None
        # A deletion recorded before `deletion` existed counts as a re-chunking (as in `doctor`).
        if live and deletion_kind(row.deletion) not in (_REMOVED, _FILTERED):
            replacement, _ = best_overlap(row.content, live_chunk_texts(engine, row.doc_id))
        found.append(DeletedGold(chunk_id, row.doc_id, live, replacement, row.deletion))
    return found


def describe(problems: Sequence[DeletedGold]) -> tuple[str, str]:
    """(reason, fix) for one or more deleted gold ids, each one line."""
    reasons = "; ".join(problem.reason for problem in problems)
    fixes = "; ".join(dict.fromkeys(problem.fix for problem in problems))
    return reasons, fixes


def unretrievable_gold(engine: Engine, chunk_ids: Sequence[str], limit: int = 5) -> list[str]:
    """One line per gold id no index can return (unknown to the KB, or deleted), at most `limit`
    lines and one that counts the rest; [] when every id is a live chunk.

    A replay marks gold ad hoc: without this its journey says `dropped at recall` for a typo or a
    DRAFT chunk, and the triager looks for a retrieval fault that is not there.
    """
    wanted = list(dict.fromkeys(c for c in chunk_ids if c))
    known = get_chunks(engine, wanted)
    lines = [
        f"gold {chunk_id} is not in the KB, so no index returns it; check the id "
        f"(`ragtriage kb show {chunk_id}`) or import the KB that holds it"
        for chunk_id in wanted
        if chunk_id not in known
    ]
    lines += [f"gold {problem.reason}; {problem.fix}" for problem in deleted_gold(engine, wanted)]
    if len(lines) > limit:
        lines = [*lines[:limit], f"… and {len(lines) - limit} more gold ids no index returns"]
    return lines
