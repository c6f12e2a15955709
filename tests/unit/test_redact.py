"""PII redaction: a corpus of queries with phone numbers, e-mails, ID-card and bank-card numbers."""

from __future__ import annotations

import pytest

from ragtriage.triage.redact import id_card_is_valid, luhn_is_valid, redact_pii

# Valid by construction: GB 11643 check digits and Luhn check digits computed by hand.
VALID_ID = "11010519491231002X"
VALID_ID_2 = "440304199001011233"
VALID_CARD_16 = "6222021234567894"
VALID_CARD_19 = "6217000000000000004"

#: (query, expected redacted query) — the corpus; each line is one kind of input seen in real logs.
CORPUS = [
    ("我的手机13812345678收不到验证码", "我的手机<PHONE>收不到验证码"),
    ("电话 +86 138-1234-5678 打不通", "电话 <PHONE> 打不通"),
    ("请回电 0086 139 1234 5678", "请回电 <PHONE>"),
    ("86-15012345678 是我的号", "<PHONE> 是我的号"),
    ("邮箱 zhang.san+vpn@corp-mail.example.com.cn 收不到邮件", "邮箱 <EMAIL> 收不到邮件"),
    ("发到 a1@b.io 或者 13712345678", "发到 <EMAIL> 或者 <PHONE>"),
    (f"身份证{VALID_ID}怎么实名", "身份证<ID_CARD>怎么实名"),
    (f"身份证号 {VALID_ID.lower()}", "身份证号 <ID_CARD>"),
    (f"工资卡{VALID_CARD_16}没到账", "工资卡<BANK_CARD>没到账"),
    ("卡号 6222 0212 3456 7894 被冻结", "卡号 <BANK_CARD> 被冻结"),
    (f"卡 {VALID_CARD_19}", "卡 <BANK_CARD>"),
    (f"{VALID_ID_2} 和 13812345678", "<ID_CARD> 和 <PHONE>"),
    # Left alone: numbers that fail their check or are not PII-shaped.
    ("订单号1234567890123456查不到", "订单号1234567890123456查不到"),
    ("身份证110105194912310021", "身份证110105194912310021"),
    ("工单 12812345678 状态", "工单 12812345678 状态"),
    ("138123456789 不是手机号", "138123456789 不是手机号"),
    ("错误码 E1001 怎么处理", "错误码 E1001 怎么处理"),
    ("v2.3 版本 2024 年发布", "v2.3 版本 2024 年发布"),
]


@pytest.mark.parametrize("query, expected", CORPUS)
def test_redaction_corpus(query: str, expected: str) -> None:
    assert redact_pii(query).text == expected


def test_counts_by_kind_and_originals_are_gone() -> None:
    query = f"手机13812345678 邮箱 a@b.cn 身份证{VALID_ID} 卡{VALID_CARD_16}"
    redaction = redact_pii(query)
    assert dict(redaction.counts) == {"phone": 1, "email": 1, "id_card": 1, "bank_card": 1}
    for original in ("13812345678", "a@b.cn", VALID_ID, VALID_CARD_16):
        assert original not in redaction.text
    assert redaction.changed


def test_nothing_to_redact_is_unchanged() -> None:
    redaction = redact_pii("请假流程怎么走")
    assert redaction.text == "请假流程怎么走" and not redaction.changed


@pytest.mark.parametrize(
    "number, valid",
    [(VALID_ID, True), (VALID_ID_2, True), ("110105194912310021", False), ("1101051949123100", False)],
)
def test_id_card_checksum(number: str, valid: bool) -> None:
    assert id_card_is_valid(number) is valid


@pytest.mark.parametrize(
    "digits, valid",
    [("4111111111111111", True), (VALID_CARD_16, True), ("4111111111111112", False), ("79927398713", True)],
)
def test_luhn(digits: str, valid: bool) -> None:
    assert luhn_is_valid(digits) is valid
