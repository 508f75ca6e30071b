"""What the panels share: the database, the chosen model, the open study and the chosen run.

Panels never call each other; they watch these traits. `results_version` goes up whenever the
open study gained points, so the Explore and Export panels refresh without polling.
"""

from __future__ import annotations

from pathlib import Path

import traitlets

from wb_core.paths import default_db


class Session(traitlets.HasTraits):
    db = traitlets.Unicode()
    model_path = traitlets.Unicode("")  # what the next sweep profiles
    model_label = traitlets.Unicode("")  # how the model is shown to the user
    study = traitlets.Unicode("")  # the study on show in Sweep, Explore and Export
    results_version = traitlets.Int(0)
    selected_key = traitlets.Unicode("")  # the run Export writes (recommended or clicked)
    selected_reason = traitlets.Unicode("")  # why that run, when it was recommended

    def __init__(self, db: str | Path | None = None, **kw):
        super().__init__(db=str(db or default_db()), **kw)

    def results(self):
        """The open study's runs (an empty frame when there is none yet)."""
        import pandas as pd

        if not self.study or not Path(self.db).exists():
            return pd.DataFrame()
        from wb_core.store import Store

        with Store(self.db, readonly=True) as s:
            if s.get_study(self.study) is None:
                return pd.DataFrame()
            return s.to_frame(self.study)

    def study_record(self) -> dict | None:
        if not self.study or not Path(self.db).exists():
            return None
        from wb_core.store import Store

        with Store(self.db, readonly=True) as s:
            return s.get_study(self.study)

    def studies(self) -> list[dict]:
        if not Path(self.db).exists():
            return []
        from wb_core.store import Store

        with Store(self.db, readonly=True) as s:
            return s.list_studies()

    def refresh(self) -> None:
        self.results_version += 1
