"""Report exports (see `export.py`): every mart as CSV, Parquet, Markdown and JSON, PNG charts
(`charts.py`), and a manifest; `markdown.py` renders rows as text."""

from dagster_project.reports.export import export_reports

__all__ = ["export_reports"]
