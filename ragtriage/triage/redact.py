"""PII redaction for queries that become eval cases: typed placeholders, validated numbers.

- ID card `<ID_CARD>`: 18-character PRC resident ID (17 digits + digit/X), valid GB 11643 check digit.
- bank card `<BANK_CARD>`: 16–19 digits (spaces or dashes between groups allowed) passing the Luhn check.
- phone `<PHONE>`: PRC mobile `1[3-9]` + 9 digits, optional `+86`/`0086`/`86`, spaces or dashes.
- e-mail `<EMAIL>`: `local@domain.tld`.

ID cards and bank cards are replaced first: an 11-digit run inside them must not become a phone.
Numbers that fail their check (a 16-digit order number that is not Luhn-valid) are left alone.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["PLACEHOLDERS", "Redaction", "id_card_is_valid", "luhn_is_valid", "redact_pii"]

PLACEHOLDERS = {"id_card": "<ID_CARD>", "bank_card": "<BANK_CARD>", "phone": "<PHONE>", "email": "<EMAIL>"}

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"

_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_ID_CARD = re.compile(r"(?<![0-9A-Za-z])\d{17}[\dXx](?![0-9A-Za-z])")
# Digits glued to ASCII letters are identifiers (error codes like E13812345678, order numbers
# like DD6222…), not phone or card numbers.
_CARD = re.compile(r"(?<![0-9A-Za-z_-])\d(?:[ -]?\d){15,18}(?![0-9A-Za-z_])")
_PHONE = re.compile(r"(?<![0-9A-Za-z_+])(?:(?:\+|00)?86[ -]?)?1[3-9]\d(?:[ -]?\d){8}(?![0-9A-Za-z_])")


def id_card_is_valid(number: str) -> bool:
    """GB 11643-1999 check: sum(digit_i × weight_i) mod 11 indexes `10X98765432` for the 18th character."""
    if len(number) != 18 or not number[:17].isdigit():
        return False
    total = sum(int(digit) * weight for digit, weight in zip(number[:17], _ID_WEIGHTS, strict=True))
    return _ID_CHECK[total % 11] == number[17].upper()


def luhn_is_valid(digits: str) -> bool:
    """Luhn (ISO/IEC 7812) check: double every second digit from the right, sum digits, total mod 10 == 0."""
    if not digits.isdigit():
        return False
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2 == 1:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


@dataclass
class Redaction:
    """A redacted text and how many items of each kind were replaced (the originals are not kept)."""

    text: str
    counts: Counter[str] = field(default_factory=Counter)

    @property
    def changed(self) -> bool:
        """True when anything was replaced."""
        return sum(self.counts.values()) > 0


def redact_pii(text: str) -> Redaction:
    """Replace phone numbers, e-mail addresses, ID-card and bank-card numbers with typed placeholders."""
    counts: Counter[str] = Counter()

    def replace_email(match: re.Match[str]) -> str:
        counts["email"] += 1
        return PLACEHOLDERS["email"]

    def replace_id(match: re.Match[str]) -> str:
        if not id_card_is_valid(match.group(0)):
            return match.group(0)
        counts["id_card"] += 1
        return PLACEHOLDERS["id_card"]

    def replace_card(match: re.Match[str]) -> str:
        digits = re.sub(r"[ -]", "", match.group(0))
        if not 16 <= len(digits) <= 19 or not luhn_is_valid(digits):
            return match.group(0)
        counts["bank_card"] += 1
        return PLACEHOLDERS["bank_card"]

    def replace_phone(match: re.Match[str]) -> str:
        counts["phone"] += 1
        return PLACEHOLDERS["phone"]

    # E-mail first: its local part may hold digits that look like a phone number.
    redacted = _EMAIL.sub(replace_email, text)
    redacted = _ID_CARD.sub(replace_id, redacted)
    redacted = _CARD.sub(replace_card, redacted)
    redacted = _PHONE.sub(replace_phone, redacted)
    return Redaction(redacted, counts)
