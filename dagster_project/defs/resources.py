import dagster as dg

from dagster_project.resources import BenchlakeSettings
from dagster_project.settings import Settings


@dg.definitions
def resources() -> dg.Definitions:
    # Environment switching happens here, once, not inside asset bodies.
    return dg.Definitions(
        resources={"benchlake": BenchlakeSettings.from_settings(Settings.from_env())}
    )
