"""(being written)

Imports the layers below scanlib/__init__.
"""

from __future__ import annotations

__all__: list[str] = []
