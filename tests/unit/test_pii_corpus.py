"""PII redaction corpus beyond `test_redact.py`: more shapes of each kind, and near-misses that stay.

Check digits are computed here from their definitions (GB 11643 for ID cards, Luhn for bank
cards), so the corpus does not depend on the redactor's own validators.
"""

from __future__ import annotations

import pytest

from ragtriage.triage.redact import redact_pii

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


def with_id_check(first17: str) -> str:
    """An 18-character ID-card number: 17 digits plus the GB 11643 check character."""
    total = sum(int(digit) * weight for digit, weight in zip(first17, _ID_WEIGHTS, strict=True))
    return first17 + "10X98765432"[total % 11]


def with_luhn_check(digits: str) -> str:
    """`digits` plus the Luhn check digit."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char) * (2 if position % 2 == 0 else 1)
        total += value - 9 if value > 9 else value
    return digits + str((10 - total % 10) % 10)


ID_X = with_id_check("51010719921130003")  # ends in X
ID_DIGIT = with_id_check("32010619850312004")
CARD_19 = with_luhn_check("621226110200123456")
CARD_16 = with_luhn_check("436742100012345")

REDACTED = [
    ("+8613812345678 打不通", "<PHONE> 打不通"),
    ("电话:(+86)13912345678", "电话:(+86)<PHONE>"),
    ("138 1234 5678 是我", "<PHONE> 是我"),
    ("号码 0086-17712345678。", "号码 <PHONE>。"),
    ("联系199-1234-5678或邮件", "联系<PHONE>或邮件"),
    ("邮件 li_si-01@example.org.cn", "邮件 <EMAIL>"),
    ("发给 WANG.Wu@Example.COM 谢谢", "发给 <EMAIL> 谢谢"),
    (f"身份证{ID_X}实名失败", "身份证<ID_CARD>实名失败"),
    (f"{ID_DIGIT}号用户", "<ID_CARD>号用户"),
    (
        f"工资卡 {CARD_19[:4]}-{CARD_19[4:8]}-{CARD_19[8:12]}-{CARD_19[12:16]}-{CARD_19[16:]} 冻结",
        "工资卡 <BANK_CARD> 冻结",
    ),
    (f"信用卡{CARD_16}还款", "信用卡<BANK_CARD>还款"),
    (f"手机13812345678 身份证{ID_X} 卡{CARD_16}", "手机<PHONE> 身份证<ID_CARD> 卡<BANK_CARD>"),
]

NEAR_MISSES = [
    "订单号 DD20240115123456 查不到",
    "订单 1381234567812345 没发货",  # 16 digits, fails Luhn
    "工单号 202401151381234567",  # 18 digits, bad ID check, not a card length that passes Luhn
    "2024-01-15 13:45:00 报错",
    "20240115 的账单",
    "时间戳 1705312800123",
    "版本 v13.8.1234 升级到 1.13.812345678",
    "错误码 E13812345678 是什么意思",
    "ORA-12154 连接失败",
    "0x80070005 拒绝访问",
    "HTTP 503 和 errno 13",
    "IP 192.168.13.81 不通",
    "座机 010-12345678",
    f"订单 DD{CARD_16} 退款",  # Luhn-valid digits glued to letters: an order number
    f"身份证{ID_DIGIT[:-1]}{'0' if ID_DIGIT[-1] != '0' else '1'}",  # wrong check digit
]


@pytest.mark.parametrize("query, expected", REDACTED)
def test_pii_is_replaced_by_typed_placeholders(query: str, expected: str) -> None:
    assert redact_pii(query).text == expected


@pytest.mark.parametrize("query", NEAR_MISSES)
def test_near_misses_are_left_alone(query: str) -> None:
    redaction = redact_pii(query)
    assert redaction.text == query and not redaction.changed


def test_check_digit_helpers_match_known_numbers() -> None:
    # Published examples: GB 11643 sample 11010519491231002X, Luhn sample 79927398713.
    assert with_id_check("11010519491231002") == "11010519491231002X"
    assert with_luhn_check("7992739871") == "79927398713"
