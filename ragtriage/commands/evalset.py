"""`ragtriage promote` (confirmed badcase → eval case) and `ragtriage doctor` (eval-set health)."""

from __future__ import annotations

import click

from ragtriage.commands.common import WorkspaceAt, dataset_option, echo_json, workspace_options
from ragtriage.commands.eval_render import print_doctor
from ragtriage.eval.doctor import run_doctor
from ragtriage.triage.promote import promote_request
from ragtriage.wording import quoted


def _grades(values: tuple[str, ...]) -> dict[str, int]:
    grades: dict[str, int] = {}
    for value in values:
        chunk_id, sep, grade = value.rpartition("=")
        if not sep or not chunk_id or not grade.lstrip("-").isdigit():
            raise click.BadParameter(
                f"{quoted(value)}: write CHUNK_ID=GRADE, e.g. --grade c12=2", param_hint="--grade"
            )
        grades[chunk_id] = int(grade)
    return grades


@click.command("promote")
@click.argument("request_id")
@dataset_option()
@click.option("--grade", "grades", multiple=True, metavar="CHUNK_ID=GRADE", help="Grade of a gold chunk [1].")
@click.option(
    "--must-have", "must_have", multiple=True, help="A constraint the answer must respect (repeatable)."
)
@click.option(
    "--intent", "intent_type", default=None, help="Intent type, e.g. howto, policy, troubleshooting."
)
@click.option("--difficulty", default=None, help="e.g. easy, medium, hard.")
@click.option("--tag", "tags", multiple=True, help="Bucket tag (repeatable).")
@click.option("--case-id", default=None, help="Case id [badcase-NNNN].")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@workspace_options
def promote_command(
    request_id: str,
    dataset: str,
    grades: tuple[str, ...],
    must_have: tuple[str, ...],
    intent_type: str | None,
    difficulty: str | None,
    tags: tuple[str, ...],
    case_id: str | None,
    as_json: bool,
    where: WorkspaceAt,
) -> None:
    """Turn the confirmed triage record of REQUEST_ID into an eval case (PII redacted, provenance kept)."""
    with where.open() as workspace:
        result = promote_request(
            workspace,
            request_id,
            dataset=dataset,
            grades=_grades(grades),
            must_have=must_have,
            intent_type=intent_type,
            difficulty=difficulty,
            tags=tags,
            case_id=case_id,
        )
    if as_json:
        echo_json(result)
        return
    if not result.created:
        click.echo(f"already in {dataset}: case {result.case_id} has the same query and gold (nothing added)")
        return
    redacted = ", ".join(f"{count} {kind}" for kind, count in result.redacted.items())
    click.echo(
        f"promoted {request_id} → {dataset}@{result.dataset_version} case {result.case_id} "
        f"({len(result.gold)} gold)" + (f"; redacted {redacted}" if redacted else "")
    )
    provenance = result.provenance
    click.echo(
        f"replay profile: {provenance['profile']} (config {provenance['config_hash']}), "
        f"the one pipeline_version {provenance['pipeline_version'] or '(none logged)'} replays with"
        + (
            " (the default: no [replay.versions] entry)"
            if provenance["profile_matched_by"] == "default"
            else ""
        )
    )


@click.command("doctor")
@dataset_option()
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@workspace_options
def doctor_command(dataset: str, as_json: bool, where: WorkspaceAt) -> None:
    """Explain metrics that come out all zero or wrong: bad gold ids, re-chunked gold, duplicates, no gold."""
    with where.open() as workspace:
        report = run_doctor(workspace, dataset)
    if as_json:
        echo_json({**report.model_dump(mode="json"), "ok": report.ok})
    else:
        print_doctor(report)
    if not report.ok:
        click.get_current_context().exit(1)
