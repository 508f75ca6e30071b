"""What the panels share: the database, the chosen model, the open study and the one recommendation.

Panels never call each other; they watch these traits. `results_version` goes up whenever the
open study gained points, so the Explore and Export panels refresh without polling.

`pick` is the dashboard's one recommendation (a `Pick`: Explore's limits and objective, the run
they pick, why, and who changed it last). Explore sets it; Export writes its run, the report
names it under its limits, Compare and Capacity start from it. No other tab changes it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import traitlets

from wb_core.faces import default_db


@dataclasses.dataclass(frozen=True)
class Pick:
    """The recommendation every tab shares: under `constraints` for `objective`, run `key` (named `name`), because `reason`.

    `chosen` is True when the user chose the run ("Export this run") instead of the recommendation.
    `note` says in words what changed it last (shown where the user is looking); `left_out`
    names runs left out of the choice (accuracy guard failed, measured oversubscribed). `study` is the
    study the run belongs to: `DashboardState.unfit` refuses a pick of any other study.
    """

    key: str = ""
    name: str = ""
    study: str = ""  # the study the run belongs to: a pick of another study is never exported
    reason: str = ""
    constraints: object = None  # a wb_core.api.Constraints; None: no limits
    objective: str = "throughput"
    chosen: bool = False
    note: str = ""
    left_out: str = ""
    runners_up: tuple = ()  # the next best runs, each a line in words

    def limits(self) -> str:
        return self.constraints.describe() if self.constraints is not None else "no constraints"


def guard_failed(df):
    """Mask of the runs whose accuracy guard failed (none when the column is absent): the guard's own reading."""
    from wb_core.faces import guard_failed_runs

    return guard_failed_runs(df)


class DashboardState(traitlets.HasTraits):
    db = traitlets.Unicode()
    model_path = traitlets.Unicode("")  # what the next sweep profiles
    model_label = traitlets.Unicode("")  # how the model is shown to the user
    study = traitlets.Unicode("")  # the study on show in Sweep, Explore and Export
    results_version = traitlets.Int(0)
    measuring = traitlets.Unicode("")  # the study a sweep or tune is adding runs to now ("" when none)
    pick = traitlets.Instance(Pick, kw={})  # the one recommendation (see the module's docstring)
    selected_key = traitlets.Unicode("")  # pick.key, for panels that watch only the run
    selected_reason = traitlets.Unicode("")  # pick.reason

    def __init__(self, db: str | Path | None = None, **kw):
        super().__init__(db=str(db or default_db()), **kw)
        self._frame = None  # (study, DataFrame): the open study's runs, read once, then grown point by point
        self.observe(self._note_opened, "study")

    def _note_opened(self, change) -> None:
        """The study on show is the one the page opens next time (`last_opened_study`)."""
        import time

        if change["new"]:
            self.save_settings({"opened_at": time.time()}, change["new"])

    def results(self):
        """The open study's runs (an empty frame when there is none yet)."""
        import pandas as pd

        if self._frame is not None and self._frame[0] == self.study:
            return self._frame[1]
        if not self.study or not Path(self.db).exists():
            return pd.DataFrame()
        from wb_core.faces import stored_runs, study_record

        df = stored_runs(self.study, self.db)
        if df.empty and study_record(self.study, self.db) is None:
            return df  # not kept: the study may be created in a moment
        self._frame = (self.study, df)
        return df

    def add_point(self, point: dict) -> None:
        """A point a running sweep just stored, added to the open study's runs without rereading them."""
        import pandas as pd

        from wb_core.faces import point_row

        if self._frame is None or self._frame[0] != self.study:
            self._frame = None
            self.results()  # read the study once (it holds this point already)
            return
        df = self._frame[1]
        row = point_row(self.study, point)
        kept = df[df["key"] != point["key"]] if not df.empty else df  # a retried point replaces its failure
        self._frame = (self.study, pd.concat([kept, row], ignore_index=True) if not kept.empty else row)

    @traitlets.observe("study", "db")
    def _forget_frame(self, _change) -> None:
        self._frame = None
        self.pick = Pick()

    @traitlets.observe("pick")
    def _pick_changed(self, change) -> None:
        self.selected_reason = change["new"].reason
        self.selected_key = change["new"].key

    # ---- the one recommendation ----
    def recommend(self, constraints=None, objective: str = "throughput", by: str = ""):
        """The recommended run of the open study under `constraints` as a Pick (NoRunMeetsConstraints
        when none meets them). Runs whose accuracy guard failed are never picked. `by` names what
        asked, for the note."""
        from wb_core.api import recommend
        from wb_core.faces import pickable, rounded, run_name, with_efficiency, word_for_dashboard, worded

        df = self.results()
        hw = (self.study_record() or {}).get("hardware")
        ok, left_out = pickable(df, hw)  # guard-failed and oversubscribed runs are never picked
        rec = recommend(with_efficiency(ok, hw), constraints, objective, hardware=hw)
        return Pick(key=str(rec.best["key"]), name=run_name(rec.best), study=self.study,
                    reason=worded(word_for_dashboard(rec.reason), df),
                    constraints=constraints, objective=objective, left_out=" ".join(left_out), note=by,
                    runners_up=tuple(f"{run_name(r)}: p99 latency {rounded(r['latency_ms_p99'], 'latency')} ms, "
                                     f"{rounded(r['throughput'], 'throughput')} samples/s" for r in rec.runners_up))

    def current_pick(self) -> Pick:
        """The pick when one is set for a run of the open study, else the recommendation without limits
        (an empty Pick when the study has no run to recommend)."""
        from wb_core.api import WorkbenchError

        df = self.results()
        if df.empty:
            return Pick()
        if self.pick.key and self.pick.study == self.study and self.pick.key in set(df["key"].astype(str)):
            return self.pick
        try:
            return self.recommend(None, "throughput")
        except WorkbenchError:
            return Pick()

    def set_pick(self, pick: Pick, why: str) -> None:
        """Make `pick` the recommendation; when its run changes, its note says so in words (`why`)."""
        old = self.pick
        if old.key and old.key != pick.key:
            note = f"The pick changed from {old.name} to {pick.name}: {why}"
        elif old.key == pick.key:
            note = old.note
        else:
            note = ""
        # a pick set without its study is one of the open study's runs
        self.pick = dataclasses.replace(pick, note=note, study=pick.study or self.study)

    def run_of(self, key: str) -> dict | None:
        """The open study's run with this key, as a dict (None when it has none)."""
        df = self.results()
        if not key or df.empty:
            return None
        rows = df[df["key"].astype(str) == str(key)]
        return rows.iloc[0].to_dict() if len(rows) else None

    def unfit(self, pick: Pick | None = None) -> str:
        """Why `pick` (default: the current pick) must not be exported or reported, in one sentence; ""
        when it may. Every export, report and download of the dashboard asks this first."""
        from wb_core.faces import unfit_reason

        pick = pick if pick is not None else self.current_pick()
        if not pick.key:
            return "Nothing to export yet: run a tune or a sweep, or open a study first."
        run = (self.run_of(pick.key) if (pick.study or self.study) == self.study
               else {"key": pick.key, "name": pick.name})
        if run is None:
            return "The chosen run is not in the open study: choose a run of this study."
        hw = (self.study_record() or {}).get("hardware")
        return unfit_reason(run, study=pick.study or self.study, open_study=self.study, hardware=hw,
                            measuring=self.measuring == self.study and bool(self.study))

    def caution(self, pick: Pick | None = None) -> str:
        """What to keep in mind about exporting `pick` (default: the current pick), e.g. measured on a busy machine."""
        from wb_core.faces import export_caution

        pick = pick if pick is not None else self.current_pick()
        return export_caution(self.run_of(pick.key)) if pick.key and pick.study in ("", self.study) else ""

    def probes(self):
        """The open study's probes (max-rate search points), each naming the run it probed in `probe_of`."""
        from wb_core.faces import stored_runs

        return stored_runs(self.study, self.db, probes=True)

    def measurements(self):
        """Runs and probes together: what a capacity plan rests on."""
        import pandas as pd

        runs, probes = self.results(), self.probes()
        if probes.empty:
            return runs
        return probes if runs.empty else pd.concat([runs, probes], ignore_index=True)

    def save_settings(self, settings: dict, study: str | None = None) -> None:
        """Keep what the user set (the Sweep tab's settings, the model's name, Explore's limits, when it was
        last opened) with the open study, for reopening it; keys not given keep their saved values."""
        study = study or self.study
        if not study or not Path(self.db).exists():
            return
        from wb_core.faces import save_study_settings, study_record

        rec = study_record(study, self.db)
        if rec is None:
            return
        saved = dict((rec.get("spec") or {}).get("dashboard") or {})
        saved.update(settings)
        save_study_settings(study, saved, self.db)

    def saved_settings(self, study: str | None = None) -> dict:
        """What `save_settings` kept with a study (empty when nothing was)."""
        rec = self.study_record() if study is None else self._record(study)
        return dict(((rec or {}).get("spec") or {}).get("dashboard") or {})

    def _record(self, study: str) -> dict | None:
        from wb_core.faces import study_record

        return study_record(study, self.db)

    def last_opened_study(self) -> str | None:
        """The study the user opened last (kept as `opened_at` with it), else the newest one; None when none."""
        rows = self.studies()
        if not rows:
            return None
        opened = {r["name"]: float(self.saved_settings(r["name"]).get("opened_at") or 0) for r in rows}
        latest = max(opened.values())
        return max(opened, key=opened.get) if latest > 0 else rows[-1]["name"]

    def study_record(self) -> dict | None:
        from wb_core.faces import study_record

        return study_record(self.study, self.db)

    def studies(self) -> list[dict]:
        if not Path(self.db).exists():
            return []
        from wb_core.api import studies

        return studies(self.db)

    def refresh(self) -> None:
        """Reread the open study and tell the panels it changed."""
        self._frame = None
        self.results_version += 1
