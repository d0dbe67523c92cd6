"""The dashboard's triage pages: the dead letter grouped by error fingerprint, one group's
executions, and the group actions (retry or discard every DEAD execution of a group). Thin like
every page (dashboard/frame.py: login, scoping, the page frame); the reads are
readmodels/dead_letter.py's, the writes dashboard/dead_letter/actions.py's (audited)."""

from django.contrib import messages
from django.http import Http404, HttpResponse, HttpResponseBadRequest, HttpResponseRedirect
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_POST

from dashboard.dead_letter.actions import GROUP_ACTIONS, dead_letter_group_act
from dashboard.executions.rows import CANCELLABLE, with_pending_reasons
from dashboard.frame import ScopedRequest, operator_view, render_page
from dashboard.services import Actor
from executions.clock import db_now
from executions.fingerprints import masked
from executions.states import REDRIVABLE
from readmodels import dead_letter

GROUP_PAGE_ROWS = 50


def _fingerprint_of(raw: str) -> str:
    key = dead_letter.fingerprint_in_path(raw)
    if key is None:
        raise Http404("no such error group")
    return key


def _pass_of(raw: str | None) -> dead_letter.Pass | None:
    """The pass a form or link continues (its cursor), or None for a new one. ValueError for a
    cursor that names no pass."""
    return dead_letter.Pass.of_token(raw) if raw else None


@require_GET
@operator_view
def dead_letter_page(request: ScopedRequest) -> HttpResponse:
    found = dead_letter.dead_letter_groups(scope=request.tenant_scope)
    return render_page(
        request,
        "dashboard/dead_letter.html",
        {"section": "dead", "dead_letter": found, "batch_seconds": dead_letter.ACTION_SECONDS},
    )


@require_GET
@operator_view
def dead_letter_group_page(request: ScopedRequest, fingerprint: str) -> HttpResponse:
    key = _fingerprint_of(fingerprint)
    scope = request.tenant_scope
    executions = list(
        dead_letter.group_executions(scope=scope, fingerprint=key).select_related("job", "tenant")[
            : GROUP_PAGE_ROWS + 1
        ]
    )
    count = dead_letter.group_count(scope=scope, fingerprint=key) if executions else 0
    if not executions:
        # Emptied (retried or discarded) or never there: say so rather than a bare 404.
        messages.info(request, "That error group has no dead executions now.")
        return HttpResponseRedirect(reverse("dashboard:dead-letter"))
    with_pending_reasons(executions)
    # After a request that did not finish its pass: the rest of that pass, to continue it.
    action, left = request.GET.get("pass"), 0
    try:
        resume = _pass_of(request.GET.get("cursor"))
    except ValueError:
        resume = None  # a link edited by hand: the page without the offer to continue
    if action in GROUP_ACTIONS and resume is not None:
        left = dead_letter.group_executions(scope=scope, fingerprint=key).filter(resume.ahead()).count()
    return render_page(
        request,
        "dashboard/dead_letter_group.html",
        {
            "section": "dead",
            "fingerprint": fingerprint,
            "masked": masked(executions[0].error) or "(no error recorded)",
            "sample": executions[0],
            "count": count,
            "executions": executions[:GROUP_PAGE_ROWS],
            "more": max(count - GROUP_PAGE_ROWS, 0),
            "cancellable": CANCELLABLE,
            "redrivable": REDRIVABLE,
            "here": request.get_full_path(),
            "continue_action": action if left else None,
            "continue_cursor": resume.token() if left and resume else "",
            "continue_left": left,
        },
    )


@require_POST
@operator_view
def dead_letter_group_action(request: ScopedRequest, fingerprint: str, action: str) -> HttpResponse:
    key = _fingerprint_of(fingerprint)
    if action not in GROUP_ACTIONS:
        raise Http404("no such action")
    try:
        resume = _pass_of(request.POST.get("cursor"))
    except ValueError as exc:
        return HttpResponseBadRequest(f"cursor: {exc}")
    outcome = dead_letter_group_act(
        actor=Actor.of(request), scope=request.tenant_scope, fingerprint=key, action=action, now=db_now(), resume=resume
    )
    done = "Re-driven" if action == "retry" else "Discarded"
    text = f"{done} {outcome.done} execution(s) of this error group."
    if outcome.refused:
        text += f" {outcome.refused} could not be (their state had changed, or a quota refused them)."
    if outcome.next is not None:
        messages.warning(request, f"{text} {outcome.remaining} more remain: press Continue to go on.")
        page = reverse("dashboard:dead-letter-group", args=[fingerprint])
        return HttpResponseRedirect(f"{page}?{urlencode({'pass': action, 'cursor': outcome.next.token()})}")
    messages.success(request, text)
    return HttpResponseRedirect(reverse("dashboard:dead-letter"))
