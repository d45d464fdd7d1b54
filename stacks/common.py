"""Small helpers shared by the stacks."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_logs as logs

from stacks.settings.environment import EnvironmentConfig

_RETENTION = {
    1: "ONE_DAY", 3: "THREE_DAYS", 5: "FIVE_DAYS", 7: "ONE_WEEK", 14: "TWO_WEEKS", 30: "ONE_MONTH",
    60: "TWO_MONTHS", 90: "THREE_MONTHS", 120: "FOUR_MONTHS", 150: "FIVE_MONTHS", 180: "SIX_MONTHS",
    365: "ONE_YEAR", 400: "THIRTEEN_MONTHS", 545: "EIGHTEEN_MONTHS", 731: "TWO_YEARS", 1096: "THREE_YEARS",
    1827: "FIVE_YEARS", 2192: "SIX_YEARS", 2557: "SEVEN_YEARS", 2922: "EIGHT_YEARS", 3288: "NINE_YEARS",
    3653: "TEN_YEARS",
}


def retention(days: int) -> logs.RetentionDays:
    """The CloudWatch Logs retention enum for a number of days (validated in settings/environment.py)."""
    return getattr(logs.RetentionDays, _RETENTION[days])


def removal_policy(config: EnvironmentConfig) -> RemovalPolicy:
    return RemovalPolicy.RETAIN if config.retain else RemovalPolicy.DESTROY
