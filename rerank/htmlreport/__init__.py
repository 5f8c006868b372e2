"""`rerank report`: one self-contained static HTML page about an evaluation.

The page holds the significance table (daggers, bootstrap intervals), each system's improvement
with its interval as a figure, scores by reference-length bucket and word F-measure by word-frequency
bucket (compare-mt's analyses) with each system's difference from the baseline, the sentences whose
output changed against the baseline sorted by sentence-level gain with the differing words marked,
the oracle curve of n-best lists, and each metric's signature with the command line. Style sheet
and figures (inline SVG) are inside the file: it opens from disk, with no server and no network.

Python: `build_report(result, refs, outputs, ReportOptions(...), ...)` -> str, `write_report(path, text)`; the
numbers come from `rerank.htmlreport.analysis`, the pictures from `rerank.htmlreport.figures`.
"""

from rerank.htmlreport.build import ReportOptions, build_report, write_report

__all__ = ["ReportOptions", "build_report", "write_report"]
