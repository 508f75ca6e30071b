"""Capacity tab: the serving questions, answered from the open study.

"How many requests per second does this run sustain under a p99 limit?" — `find_max_rate` tries
Poisson arrival rates of one run (each probe stored as a point of the study) and the tab draws
p99 against arrival rate as they come. "What do I need for N requests per second?" — `capacity`
(and `plan_allocation` for the split of one replica's CPUs) turns the study's measurements into
instances, cores, replicas and CPUs, in words.
"""

from __future__ import annotations

import html
import threading

import ipywidgets as w

from wb_core.faces import p99_verdict, within_p99
from wb_core.ui.state import DashboardState
from wb_core.ui.widgets import CSS, MessageArea, PlotArea, button, caption, guarded, key_values, section, text, with_help
from wb_core.ui.words import MODES, plural, rounded, run_name

NO_STUDY = "Nothing to work from yet: run a sweep, or open a study in the Sweep tab."


def number(value: str, name: str, low: float, high: float, *, integer: bool = False, low_open: bool = False,
           blank_ok: bool = False):
    """A number typed into a text box, or a ConfigError saying in one sentence what is wrong with it."""
    from wb_core.api import ConfigError
    from wb_core.faces import check_number

    raw = str(value).strip().replace(",", "")
    if not raw:
        if blank_ok:
            return None
        raise ConfigError(f"{name} is empty; type a number.")
    try:
        parsed = int(raw) if integer and raw.lstrip("+-").isdigit() else float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number; got '{raw}'.") from None
    return check_number(parsed, name, low, high, integer=integer, low_open=low_open)


def closed_loop_runs(df):
    """The runs a rate search can start from: successful, one instance, back-to-back requests."""
    if df is None or df.empty:
        return df
    ok = df[df["status"] == "ok"]
    if "rate" in ok:
        ok = ok[ok["rate"].isna()]
    if "instances" in ok:
        ok = ok[ok["instances"].fillna(1) <= 1]
    return ok


def run_options(df) -> list[tuple[str, str]]:
    """(name in words, key) for every run a rate search can start from; a name shared by two runs
    gets its measured throughput (and then a number) added, so every entry reads differently."""
    runs = closed_loop_runs(df)
    if runs is None or runs.empty:
        return []
    names = [f"{run_name(r)} — {rounded(r.get('throughput'), 'throughput')} samples/s" for _, r in runs.iterrows()]
    seen: dict[str, int] = {}
    out = []
    for name, key in zip(names, runs["key"].astype(str)):
        seen[name] = seen.get(name, 0) + 1
        out.append((name if seen[name] == 1 else f"{name} (run {seen[name]} with these settings)", key))
    return out


def probes_table(probes: list[dict]) -> str:
    """The rates tried so far, in the order tried, each with its p99 and whether it kept the limit."""
    rows = "".join(f"<tr><td>{i}</td><td>{html.escape(rounded(p['rate']))}</td>"
                   f"<td>{html.escape(rounded(p['p99'], 'latency_ms_p99'))}</td>"
                   f"<td style='text-align:left'>{html.escape(p.get('verdict', ''))}</td></tr>"
                   for i, p in enumerate(probes, 1))
    return ("<table class='wb-table'><thead><tr><th>Try</th><th>Arrival rate (req/s)</th><th>p99 latency (ms)</th>"
            f"<th>Result</th></tr></thead><tbody>{rows}</tbody></table>")


def plan_sentence(plan) -> str:
    """The capacity plan as one sentence a non-coder can act on (the plan's own)."""
    return plan.sentence()


def plan_rows(plan, machine_cpus: int) -> list[tuple[str, str]]:
    usable = plan.per_instance_rate * (1 - plan.headroom)
    return [
        ("Instances needed", f"{plan.instances}"),
        ("Cores per instance", f"{plan.cores_per_instance}"),
        ("Replicas", f"{plan.replicas} (machines or pods of {plural(machine_cpus, 'CPU')}, at most "
                     f"{plural(plan.instances_per_machine, 'instance')} each)"),
        ("Instances per replica", f"{plan.instances_per_replica}"),
        ("CPUs in total", f"{plan.total_cpus} (CPU request = limit = {plan.cpu_request} per instance)"),
        ("One instance serves", f"{rounded(plan.per_instance_rate, 'throughput')} requests/s measured "
                                f"({plan_mode(plan)}); planned at {rounded(usable, 'throughput')} to keep "
                                f"{plan.headroom:.0%} spare"),
    ]


def plan_mode(plan) -> str:
    """How the plan's per-instance rate was measured, in the dashboard's words."""
    return MODES["open"] if str(plan.basis).startswith("open-loop") else MODES["closed"]


def modes_explained(run: dict, closed_rate: float | None, best_rate: float | None) -> str:
    """Why the sweep's figure for a run and the rate search's differ, in words: samples vs requests
    (a request carries a batch), back to back vs arriving at random, measured now vs then."""
    batch = int(run.get("batch_size") or 1)
    sweep = run.get("throughput")
    parts = []
    if sweep is not None and sweep == sweep:
        parts.append(f"The Sweep and Explore tabs show {rounded(sweep, 'throughput')} samples/s for this run: "
                     f"{MODES['closed']}, {plural(batch, 'sample')} per request, so "
                     f"{rounded(sweep / batch, 'throughput')} requests/s.")
    if closed_rate:
        from wb_core.faces import within_noise

        again = closed_rate * batch
        low, high = run.get("throughput_ci_low"), run.get("throughput_ci_high")
        noise = within_noise(again, low, high)
        if noise:
            verdict = (f"within the run's 95% interval ({rounded(low, 'throughput')} to "
                       f"{rounded(high, 'throughput')} samples/s): the two differ by measurement noise.")
        elif noise is False:
            verdict = (f"outside the run's 95% interval ({rounded(low, 'throughput')} to "
                       f"{rounded(high, 'throughput')} samples/s): more than measurement noise, so the machine's "
                       "load changed between the two; measure again when it is quieter.")
        elif sweep is not None and sweep == sweep and sweep > 0:
            verdict = (f"{abs(again / sweep - 1):.0%} apart; the run was measured in one round, so no interval "
                       "says whether that is noise (repeats of 3 or more give one).")
        else:
            verdict = "the run has no figure of its own to compare with."
        parts.append(f"The search measured it again back to back first: {rounded(closed_rate, 'throughput')} "
                     f"requests/s ({rounded(again, 'throughput')} samples/s), {verdict}")
    if best_rate and closed_rate:
        parts.append(f"Requests arriving at random ({MODES['open']}) sometimes come together and wait in a queue, "
                     f"and the p99 limit counts that wait: so the sustainable rate, {rounded(best_rate)} requests/s, "
                     "is lower than back to back.")
    return " ".join(parts)


class CapacityPanel(w.VBox):
    """Max rate under a p99 limit for one run of DashboardState.study, and a capacity plan for a target rate."""

    def __init__(self, session: DashboardState):
        from wb_core.api import available_cpus, plots

        self.session = session
        self.here = len(available_cpus())
        # ---- max rate ----
        self.rate_messages = MessageArea()
        self.run = with_help(w.Dropdown(options=[], description="Run", style={"description_width": "150px"},
                                        layout=w.Layout(width="820px")),
                             "The measured run whose settings serve the requests; by default the run chosen in "
                             "Explore (the recommended one until you click another).")
        self.p99 = with_help(text("p99 limit (ms)", "10", placeholder="e.g. 10"),
                             "99 in 100 requests must finish within this many milliseconds, queueing included.")
        self.probe_time = with_help(text("Seconds per rate", "2"),
                                    "How long each arrival rate is measured. Longer is steadier; short is for a "
                                    "quick look.")
        self.steps = with_help(text("Rates to try", "7"),
                               "Each try halves the gap between the highest rate that kept the limit and the lowest "
                               "that did not; more tries give a closer answer.")
        self.find = button("Find max rate", "primary", "search",
                           "Measure requests arriving at random (Poisson) at several rates")
        self.rate_progress = w.HTML()
        self.rate_progress.add_class("wb-rate-progress")
        self.rate_answer = w.HTML()
        self.rate_answer.add_class("wb-rate-answer")
        self.rate_table = w.HTML()
        self.rate_table.add_class("wb-rate-table")
        self.rate_plot = PlotArea(plots.rate_figure([], None))
        self.rate_plot.add_class("wb-rate-plot")
        self.rate_caption = caption(
            "Each dot is one arrival rate tried, requests arriving at random like real traffic. Dots under the dashed "
            "line kept p99 within the limit; the star is the highest such rate. A cross at the top means requests "
            "queued up faster than they were served at that rate.")
        self._searching: threading.Thread | None = None
        self._probes: list[dict] = []
        self.pick_note = w.HTML()
        # ---- capacity plan ----
        self.plan_messages = MessageArea()
        self.target = with_help(text("Target (requests/s)", "1000", placeholder="e.g. 5000"),
                                "How many requests per second the service must handle at peak.")
        self.plan_p99 = with_help(text("Planned p99 limit (ms)", "", placeholder="no limit"),
                                  "Optional: only measurements whose p99 stayed within this many milliseconds count. "
                                  "Leave empty for no latency limit.")
        self.machine = with_help(text("CPUs per replica", str(self.here)),
                                 f"CPUs of one machine or pod the service runs on (this machine has {self.here}).")
        self.headroom = with_help(text("Spare capacity (%)", "20"),
                                  "Capacity kept free for bursts: 20 plans each instance at 80% of what it served.")
        self.plan_button = button("Plan", "primary", "calculator", "Work out instances, replicas and CPUs")
        self.plan_out = w.HTML()
        self.plan_out.add_class("wb-plan")
        self.basis = w.HTML()
        self.basis.add_class("wb-plan-basis")
        self.split = w.HTML()
        self.split.add_class("wb-plan-split")

        self.find.on_click(guarded(self.rate_messages)(self._on_find))
        self.plan_button.on_click(guarded(self.plan_messages)(self._on_plan))
        session.observe(guarded(self.rate_messages)(self.refresh_runs), ["study", "results_version"])
        session.observe(guarded(self.rate_messages)(self._on_selected), "pick")
        session.observe(guarded(self.rate_messages)(self.show_last_answer), "study")
        self.run.control.observe(guarded(self.rate_messages)(self._on_run_changed), "value")
        for box in (self.run, self.p99, self.probe_time, self.steps):  # an error about a changed field goes
            box.control.observe(self.rate_messages.clear_error, "value")
        for box in (self.target, self.plan_p99, self.machine, self.headroom):
            box.control.observe(self.plan_messages.clear_error, "value")
        super().__init__([
            w.HTML(CSS), section("Highest rate under a p99 limit"),
            w.HTML("<i>Requests arrive at random, as from many users; the search finds the highest arrival rate "
                   "this run keeps p99 within the limit. Every rate tried is stored in the study.</i>"),
            self.run, self.pick_note, self.p99, self.probe_time, self.steps, self.find, self.rate_progress, self.rate_messages,
            self.rate_answer, self.rate_table, self.rate_plot, self.rate_caption,
            section("Capacity plan"),
            w.HTML("<i>From the open study's measurements: how many instances, replicas and CPUs serve a target "
                   "rate.</i>"),
            self.target, self.plan_p99, self.machine, self.headroom, self.plan_button, self.plan_messages,
            self.plan_out, self.basis, self.split,
        ])
        self.add_class("wb-capacity-panel")
        guarded(self.rate_messages)(self.refresh_runs)()
        guarded(self.rate_messages)(self.show_last_answer)()

    # ---- choosing the run ----
    def default_key(self, keys: list[str]) -> str | None:
        """The dashboard's pick (Explore's recommendation, or the run chosen there), else the first."""
        key = self.session.current_pick().key
        if key in keys:
            return key
        return keys[0] if keys else None

    def refresh_runs(self, *_):
        options = run_options(self.session.results()) if self.session.study else []
        keys = [k for _, k in options]
        current = self.run.control.value
        self.run.control.options = options
        self.run.control.value = current if current in keys else self.default_key(keys)
        self.find.disabled = not options or self._busy()

    def _on_selected(self, change):
        """Explore's pick changed: the Run box follows it, and says so here (not while a search runs)."""
        keys = [k for _, k in self.run.control.options]
        new = change["new"]
        if self._busy() or new.key == change["old"].key or new.key not in keys:
            return
        if self.run.control.value != new.key:
            self.run.control.value = new.key
            self.pick_note.value = (f"<div class='wb-msg wb-msg-info wb-pick-changed'>The Run box now holds "
                                    f"Explore's pick, {html.escape(new.name)}"
                                    + (f" ({html.escape(new.note)})" if new.note else "") + ".</div>")

    def _on_run_changed(self, change):
        """Say when the run searched is not the one Explore picked (and Export writes)."""
        pick = self.session.current_pick()
        if not change["new"] or not pick.key or change["new"] == pick.key:
            self.pick_note.value = ""
            return
        self.pick_note.value = (f"<div class='wb-msg wb-msg-info wb-not-pick'>This is not Explore's pick "
                                f"({html.escape(pick.name)}, the run Export writes); searching it changes neither.</div>")

    def _busy(self) -> bool:
        return self._searching is not None and self._searching.is_alive()

    # ---- max rate ----
    def _on_find(self, *_):
        from wb_core.api import MeasureSettings, plots, run_config

        self.rate_messages.clear()
        if self._busy():
            self.rate_messages.show("A rate search is running; wait for it to finish.", "error")
            return
        key = self.run.control.value
        record = self.session.study_record()
        if not key or record is None:
            self.rate_messages.show(NO_STUDY, "error")
            return
        p99 = number(self.p99.control.value, "The p99 limit (ms)", 0, 1e7, low_open=True)
        secs = number(self.probe_time.control.value, "Seconds per rate", 0.2, 600)
        steps = number(self.steps.control.value, "Rates to try", 1, 30, integer=True)
        config = run_config(self.session.study, key, self.session.db)
        settings = MeasureSettings(max_time_s=secs, warmup_s=min(0.5, secs / 2), window_s=min(0.5, secs / 3))
        name = dict((k, n) for n, k in self.run.control.options)[key].split(" — ")[0]
        self._probes = []
        self.rate_answer.value = self.rate_table.value = ""
        self.rate_plot.show(plots.rate_figure([], p99))
        self.find.disabled = True
        self.rate_progress.value = (f"<i>Working… measuring {html.escape(name)} with back-to-back requests first, "
                                    f"then up to {steps} arrival rates of {rounded(secs)} s each.</i>")
        self._searching = threading.Thread(target=self._search, args=(record["model_path"], config, p99, settings,
                                                                      steps, name, key),
                                           daemon=True, name="wb-max-rate")
        self._searching.start()

    def _search(self, model, config, p99, settings, steps, name, key) -> None:
        from wb_core.api import find_max_rate, plots

        s = self.session
        try:
            result = find_max_rate(model, config, p99, db=s.db, study=s.study, settings=settings, steps=steps,
                                   on_point=lambda point: self._on_probe(point, p99), probe_of=key)
            n = len(self._probes)
            self.rate_progress.value = (f"<i>Done: {plural(n, 'rate')} tried and stored with the study as probes of "
                                        "this run (they are not runs: Explore, Compare and Layers do not list "
                                        "them).</i>")
            self.show_answer(result, p99, name, self._run_row(key))
        except Exception as e:  # shown inline; the thread must not die silently
            self.rate_progress.value = ""
            self.rate_messages.error(e)
        finally:
            self._searching = None
            self.find.disabled = False
            try:
                if self._probes:
                    self.rate_plot.show(plots.rate_figure(list(self._probes), p99, self.best_so_far(p99)))
                # Probes are not runs: the other tabs (and the pick) have nothing new to show.
            except Exception as e:
                self.rate_messages.error(e)

    def _on_probe(self, point: dict, p99_ms: float) -> None:
        from wb_core.api import plots

        try:
            cfg, m = point["config"], point.get("metrics") or {}
            rate = getattr(cfg, "rate", None)
            if rate is None:
                return
            p99 = m.get("latency_ms_p99")
            probe = {"rate": float(rate), "p99": None if p99 is None else float(p99),
                     "saturated": bool(m.get("saturated")), "status": point.get("status")}
            self._probes.append(probe)
            if point.get("status") != "ok":
                how = f"failed ({point.get('error')})"
            else:
                how = p99_verdict(probe["p99"], p99_ms, probe["saturated"])
            probe["verdict"] = how
            self.rate_progress.value = (f"<i>Working… tried {plural(len(self._probes), 'rate')}; last: "
                                        f"{rounded(probe['rate'])} requests/s → {html.escape(how)}.</i>")
            self.rate_table.value = probes_table(self._probes)
            self.rate_plot.show(plots.rate_figure(list(self._probes), p99_ms, self.best_so_far(p99_ms)))
        except Exception as e:  # never break the search over a drawing problem
            self.rate_messages.error(e)

    def best_so_far(self, p99_ms: float) -> float | None:
        """The highest rate tried that kept p99 within the limit (the search's answer once it ends)."""
        passed = [p["rate"] for p in self._probes if p["status"] == "ok" and within_p99(p["p99"], p99_ms, p["saturated"])]
        return max(passed) if passed else None

    def _run_row(self, key: str) -> dict:
        df = self.session.results()
        rows = df[df["key"].astype(str) == key] if not df.empty else df
        return rows.iloc[0].to_dict() if len(rows) else {}

    def show_answer(self, result: dict, p99_ms: float, name: str, run: dict | None = None) -> None:
        best = result.get("best")
        closed = result.get("closed_loop_rate")
        why = modes_explained(run or {}, closed, best["rate"] if best else None)
        explained = f"<div class='wb-caption wb-modes'>{html.escape(why)}</div>" if why else ""
        if best:
            self.rate_answer.value = (
                f"<div class='wb-msg wb-msg-ok'><b class='wb-max-rate'>{html.escape(name)} sustains "
                f"{rounded(best['rate'])} requests/s arriving at random with p99 ≤ {rounded(p99_ms)} ms</b> "
                f"(measured p99 {rounded(best['p99_ms'], 'latency')} ms).</div>" + explained)
        else:
            self.rate_answer.value = (
                f"<div class='wb-msg wb-msg-error'><b class='wb-max-rate'>No rate tried kept p99 within "
                f"{rounded(p99_ms)} ms for {html.escape(name)}.</b> Relax the limit, or pick a run with "
                f"a lower p99.</div>" + explained)

    def show_last_answer(self, *_):
        """The study's last rate search as it was answered (a reopened study shows it again), with its probes."""
        from wb_core.api import plots

        self._probes = []
        self.rate_answer.value = self.rate_table.value = self.rate_progress.value = ""
        self.rate_plot.show(plots.rate_figure([], None))
        last = ((self.session.study_record() or {}).get("spec") or {}).get("last_max_rate") or {}
        answer, key, p99 = last.get("answer"), last.get("run_key"), last.get("p99_ms")
        if not answer or not key or p99 is None:
            return
        run = self._run_row(key)
        probes = self.session.probes()
        if not probes.empty and "probe_of" in probes.columns:
            for _, r in probes[probes["probe_of"].astype(str) == key].iterrows():
                p = r.get("latency_ms_p99")
                probe = {"rate": float(r["rate"]), "p99": None if p is None or p != p else float(p),
                         "saturated": r.get("saturated") in (True, 1), "status": r["status"]}
                probe["verdict"] = p99_verdict(probe["p99"], p99, probe["saturated"])
                self._probes.append(probe)
        name = run_name(run) if run else "a run no longer in the study"
        self.rate_progress.value = f"<i>The study's last rate search, of {html.escape(name)}:</i>"
        self.show_answer(answer, float(p99), name, run)
        self.p99.control.value = rounded(float(p99))
        if self._probes:
            self.rate_table.value = probes_table(self._probes)
            best = answer.get("best") or {}
            self.rate_plot.show(plots.rate_figure(list(self._probes), float(p99), best.get("rate")))

    # ---- capacity plan ----
    def _on_plan(self, *_):
        from wb_core.api import capacity

        self.plan_messages.clear()
        self.plan_out.value = self.basis.value = self.split.value = ""
        df = self.session.measurements()
        if df.empty:
            self.plan_messages.show(NO_STUDY, "error")
            return
        rate = number(self.target.control.value, "The target rate (requests/s)", 0, 1e9, low_open=True)
        p99 = number(self.plan_p99.control.value, "The p99 limit (ms)", 0, 1e7, low_open=True, blank_ok=True)
        cpus = number(self.machine.control.value, "CPUs per replica", 1, 65536, integer=True)
        headroom = number(self.headroom.control.value, "Spare capacity (%)", 0, 99) / 100
        plan = capacity(df, rate, p99, headroom, cpus)
        self.plan_out.value = (f"<div class='wb-msg wb-msg-ok'><b class='wb-plan-sentence'>"
                               f"{html.escape(plan_sentence(plan))}</b></div>" + key_values(plan_rows(plan, cpus)))
        self.basis.value = self.basis_html(df, plan)
        self.split.value = self.split_html(df, p99, cpus)

    def basis_html(self, df, plan) -> str:
        row = df[df["key"].astype(str) == plan.source_key]
        name = run_name(row.iloc[0]) if not row.empty else plan.source_key
        if plan.basis.startswith("open-loop"):
            how = MODES["open"]
        else:
            how = (f"{MODES['closed']}, so queueing is not included and the plan is optimistic (a request carries "
                   "its run's batch, so requests/s are samples/s divided by the batch); find the max rate above "
                   "first for a plan that includes queueing")
        hw = (self.session.study_record() or {}).get("hardware") or {}
        where = hw.get("cpu_model") or "an unrecorded CPU"
        cpus = hw.get("logical_cores") or len(hw.get("available_cpus") or [])
        where += f" ({cpus} CPUs)" if cpus else ""
        return (f"<div class='wb-caption'>Based on run <b>{html.escape(name)}</b> of study "
                f"<b>{html.escape(self.session.study)}</b>, measured with {html.escape(how)}, on "
                f"{html.escape(where)}. On a different CPU, measure there before relying on it.</div>")

    def split_html(self, df, p99, cpus: int) -> str:
        from wb_core.api import WorkbenchError, plan_allocation

        try:
            splits = plan_allocation(df, cpus, p99, top=3)
        except WorkbenchError:
            return ("<div class='wb-caption'>How to split one replica's CPUs into instances: sweep with cores pinned "
                    "(e.g. Cores pinned 0,0-1) to see it.</div>")
        rows = "".join(
            f"<tr><td>{a.instances} × {a.cores_per_instance} core{'s' if a.cores_per_instance != 1 else ''}</td>"
            f"<td>{html.escape(rounded(a.predicted_throughput, 'throughput'))}</td>"
            f"<td>{'estimated from fewer cores' if a.extrapolated else 'measured'}</td></tr>" for a in splits)
        return (f"<b>Best ways to split one replica's {cpus} CPUs</b><table class='wb-table'><thead><tr>"
                "<th>Instances × cores</th><th>Throughput (samples/s)</th><th>Per-instance figure</th></tr></thead>"
                f"<tbody>{rows}</tbody></table>"
                "<div class='wb-caption'>Each row runs copies of the model side by side, each pinned to its own "
                "cores; throughput is one copy's measured figure times the copies.</div>")


__all__ = ["CapacityPanel", "number", "plan_sentence", "probes_table", "run_options"]
