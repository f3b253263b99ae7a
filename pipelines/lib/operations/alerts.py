"""Alerts where operators look: a Slack-compatible JSON message (``{"text": ...}``) to a webhook whose URL
comes from configuration ($FLEET_ALERT_WEBHOOK_URL). The URL is a secret (anyone holding it can post): it is
never logged, printed or put in an error message."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass

from pipelines.lib.settings import ALERT_WEBHOOK

URL_ENV = ALERT_WEBHOOK.env
TIMEOUT_S = 10.0


class AlertNotSent(Exception):
    """The webhook did not take the message (the message says why, never the URL)."""


@dataclass(frozen=True)
class FailedCheck:
    asset: str
    check: str
    severity: str  # "error" or "warn"
    blocking: bool
    description: str

    def line(self) -> str:
        kind = "blocking" if self.blocking else self.severity
        return f"{self.asset}/{self.check} ({kind}): {self.description or 'failed'}"


def webhook_url(env: str = URL_ENV) -> str | None:
    """The configured webhook URL, or None when alerts are off."""
    return os.environ.get(env, "").strip() or None


def alertable(checks: list[FailedCheck]) -> list[FailedCheck]:
    """The failed checks an operator is alerted to: blocking ones and error ones (samples that did not
    arrive); warnings show in the UI and in `fleet run` only."""
    return [c for c in checks if c.blocking or c.severity == "error"]


def run_message(
    job: str,
    partition: str | None,
    run_id: str,
    *,
    failed: bool,
    checks: list[FailedCheck],
    failure: str | None = None,
) -> dict[str, str]:
    """The message for one run: a failed run (with why, and the checks that failed), or a run that
    succeeded with failed error checks. Slack-compatible: one ``text`` field, mrkdwn."""
    what = f"`{job}` run for {partition}" if partition else f"`{job}` run"
    if failed:
        head = f":red_circle: fleet: the {what} failed (run {run_id[:8]})"
    else:
        head = f":warning: fleet: the {what} succeeded, but {len(checks)} check(s) failed (run {run_id[:8]})"
    lines = [head]
    if failure:
        lines.append(f"why: {failure}")
    lines += [f"• {c.line()}" for c in checks]
    if failed and not checks:
        lines.append("no check failed: see the run's logs in the Dagster UI")
    return {"text": "\n".join(lines)}


def post(url: str, message: dict[str, str], timeout_s: float = TIMEOUT_S) -> None:
    """POST ``message`` as JSON; ``AlertNotSent`` (without the URL) when the webhook does not answer 2xx."""
    request = urllib.request.Request(
        url,
        data=json.dumps(message).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        raise AlertNotSent(f"the webhook (${URL_ENV}) answered HTTP {exc.code}") from None
    except ValueError:  # its message would quote the URL
        raise AlertNotSent(f"${URL_ENV} is not an http(s) URL") from None
    except urllib.error.URLError as exc:  # reason: the socket error ("Connection refused"), never the URL
        raise AlertNotSent(f"the webhook (${URL_ENV}) could not be reached: {exc.reason}") from None
    except OSError as exc:
        raise AlertNotSent(f"the webhook (${URL_ENV}) could not be reached: {exc.strerror or exc}") from None
    if not 200 <= status < 300:
        raise AlertNotSent(f"the webhook (${URL_ENV}) answered HTTP {status}")
