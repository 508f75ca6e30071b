"""Runtime backends behind one small protocol (see base.py); imported lazily inside workers."""

from __future__ import annotations

from wb_core.backends.base import BACKEND_FORMATS, Session, open_session

__all__ = ["BACKEND_FORMATS", "Session", "open_session"]
