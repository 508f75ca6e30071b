"""What the panels share: the database, the chosen model, the open study and the chosen run.

Panels never call each other; they watch these traits. `results_version` goes up whenever the
open study gained points, so the Explore and Export panels refresh without polling.
"""

from __future__ import annotations

from pathlib import Path

import traitlets

from wb_core.api import default_db


class DashboardState(traitlets.HasTraits):
    db = traitlets.Unicode()
    model_path = traitlets.Unicode("")  # what the next sweep profiles
    model_label = traitlets.Unicode("")  # how the model is shown to the user
    study = traitlets.Unicode("")  # the study on show in Sweep, Explore and Export
    results_version = traitlets.Int(0)
    selected_key = traitlets.Unicode("")  # the run Export writes (recommended or clicked)
    selected_reason = traitlets.Unicode("")  # why that run, when it was recommended

    def __init__(self, db: str | Path | None = None, **kw):
        super().__init__(db=str(db or default_db()), **kw)
        self._frame = None  # (study, DataFrame): the open study's runs, read once, then grown point by point

    def results(self):
        """The open study's runs (an empty frame when there is none yet)."""
        import pandas as pd

        if self._frame is not None and self._frame[0] == self.study:
            return self._frame[1]
        if not self.study or not Path(self.db).exists():
            return pd.DataFrame()
        from wb_core.api import Store

        with Store(self.db, readonly=True) as s:
            if s.get_study(self.study) is None:
                return pd.DataFrame()
            df = s.to_frame(self.study)
        self._frame = (self.study, df)
        return df

    def add_point(self, point: dict) -> None:
        """A point a running sweep just stored, added to the open study's runs without rereading them."""
        import pandas as pd

        from wb_core.api import point_record, results_frame

        if self._frame is None or self._frame[0] != self.study:
            self._frame = None
            self.results()  # read the study once (it holds this point already)
            return
        df = self._frame[1]
        row = results_frame([point_record(self.study, point)])
        kept = df[df["key"] != point["key"]] if not df.empty else df  # a retried point replaces its failure
        self._frame = (self.study, pd.concat([kept, row], ignore_index=True) if not kept.empty else row)

    @traitlets.observe("study", "db")
    def _forget_frame(self, _change) -> None:
        self._frame = None

    def study_record(self) -> dict | None:
        if not self.study or not Path(self.db).exists():
            return None
        from wb_core.api import Store

        with Store(self.db, readonly=True) as s:
            return s.get_study(self.study)

    def studies(self) -> list[dict]:
        if not Path(self.db).exists():
            return []
        from wb_core.api import Store

        with Store(self.db, readonly=True) as s:
            return s.list_studies()

    def refresh(self) -> None:
        """Reread the open study and tell the panels it changed."""
        self._frame = None
        self.results_version += 1
