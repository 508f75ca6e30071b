"""Layers tab: where one run of the open study spends its time, layer by layer.

Pick a run, press "Profile layers": a worker set up like that run reads OpenVINO's performance
counters (a few seconds, in a thread). The profile is kept in the database, so a run is profiled
once; the Compare tab reuses it. Shown: time per layer type (table and bars) and the slowest
layers with the precision each executed in.
"""

from __future__ import annotations

import threading

import ipywidgets as w

from wb_core.ui.state import DashboardState
from wb_core.ui.widgets import CSS, MessageArea, PlotArea, button, caption, guarded, section, with_help
from wb_core.ui.words import results_table, rounded, run_name

TOP_TYPES = 12  # layer types in the bar chart
TOP_LAYERS = 15  # layers in the table of the slowest
ITERATIONS = 100  # inferences the counters average over


def run_choices(df) -> list[tuple[str, str]]:
    """(name, key) of each ok run of a results frame, named by its settings (a name two runs share gets
    its measured throughput, then a number, so every entry reads differently without an id)."""
    if df is None or df.empty:
        return []
    ok = df[df["status"] == "ok"]
    names = [run_name(r) for _, r in ok.iterrows()]
    names = [f"{n} — {rounded(r.get('throughput'), 'throughput')} samples/s" if names.count(n) > 1 else n
             for n, (_, r) in zip(names, ok.iterrows())]
    seen: dict[str, int] = {}
    out = []
    for name, key in zip(names, ok["key"].astype(str)):
        seen[name] = seen.get(name, 0) + 1
        out.append((name if seen[name] == 1 else f"{name} (run {seen[name]} with these settings)", key))
    return out


def unsupported(backend) -> str | None:
    """The plain sentence for a run whose runtime has no per-layer counters (None when it has them)."""
    from wb_core.faces import backend_title, layer_profiling_backends

    able = layer_profiling_backends()
    if str(backend) in able:
        return None
    titles = " or ".join(backend_title(b) for b in able)
    return (f"Per-layer times come from {titles}'s performance counters, and this run used "
            f"{backend_title(str(backend))}; pick a{'n' if titles[:1] in 'AEIOU' else ''} {titles} run.")


def type_table(profile):
    """Time per layer type with its share in percent (the columns the tab shows)."""
    t = profile.by_type()
    return t.assign(share_pct=t["share"] * 100)


def layer_table(profile, n: int = TOP_LAYERS):
    top = profile.top(n)
    return top.assign(share_pct=top["share"] * 100, executed_precision=top["precision"])


class LayersPanel(w.VBox):
    """Profiles the layers of one run of DashboardState.study."""

    def __init__(self, session: DashboardState):

        self.session = session
        self.messages = MessageArea()
        self.run_box = with_help(w.Dropdown(options=[], description="Run", style={"description_width": "150px"},
                                            layout=w.Layout(width="620px")),
                                 "One run of the open study, named by its settings. Its layers are profiled with "
                                 "exactly those settings (cores, threads, precision, batch).")
        self.run = self.run_box.control
        self.profile_button = button("Profile layers", "primary", "search",
                                     "Measure the time of every layer of this run (a few seconds)")
        self.status = w.HTML()
        self.status.add_class("wb-layers-status")
        self.result = w.VBox()
        self.result.add_class("wb-layers-result")
        self._thread: threading.Thread | None = None
        self.run.observe(guarded(self.messages)(self._on_run), "value")
        self.profile_button.on_click(guarded(self.messages)(self._on_profile))
        session.observe(guarded(self.messages)(self._on_study), "study")
        session.observe(guarded(self.messages)(self._on_study), "results_version")
        super().__init__([w.HTML(CSS), section("Layers"), w.HTML(
            "Where one run spends its time, layer by layer, and the precision each layer really executed in."),
            self.run_box, self.profile_button, self.status, self.messages, self.result])
        self.add_class("wb-layers-panel")
        guarded(self.messages)(self._on_study)()

    def _row(self, key: str):
        df = self.session.results()
        hit = df[df["key"].astype(str) == key]
        return None if hit.empty else hit.iloc[0]

    def _on_study(self, *_):
        options = run_choices(self.session.results())
        keep = self.run.value
        self.run.options = options
        if options:
            self.run.value = keep if keep in dict((k, n) for n, k in options) else options[0][1]
        else:
            self.result.children = []
            self.status.value = "<i>No successful runs yet: run a sweep, or open a study in the Sweep tab.</i>"
        self._on_run()

    def _on_run(self, *_):
        """Show the stored profile of the chosen run, if it has one; say so when it cannot have one."""
        busy = self._thread is not None and self._thread.is_alive()
        key = self.run.value
        self.messages.clear()
        if not key:
            self.profile_button.disabled = True
            return
        row = self._row(key)
        why = unsupported(row["backend"]) if row is not None else None
        self.profile_button.disabled = busy or why is not None
        if why:
            self.status.value = ""
            self.result.children = []
            self.messages.show(why)
            return
        from wb_core.faces import stored_layer_profile

        stored = stored_layer_profile(self.session.db, self.session.study, key)
        if stored is not None:
            self.show(stored, key)
            self.status.value = "Profiled earlier (kept in the database); press Profile layers to measure it again."
        elif not busy:
            self.result.children = []
            self.status.value = "<i>Not profiled yet: press Profile layers.</i>"

    def _on_profile(self, *_):
        if self._thread is not None and self._thread.is_alive():
            return
        key = self.run.value
        if not key:
            self.messages.show("Pick a run first.", "error")
            return
        self.messages.clear()
        self.profile_button.disabled = True
        self.status.value = f"Profiling the layers of {self._name(key)}: about {ITERATIONS} inferences in a fresh " \
                            f"worker, a few seconds…"
        self._thread = threading.Thread(target=self._profile, args=(self.session.study, key), daemon=True)
        self._thread.start()

    def _profile(self, study: str, key: str) -> None:
        from wb_core.api import layer_profile
        from wb_core.faces import save_layer_profile

        try:
            # Measured again on request (a stored profile is already on show); kept for Compare.
            profile = layer_profile(study, key, self.session.db, iterations=ITERATIONS)
            save_layer_profile(study, key, profile, self.session.db)
            if self.run.value == key:
                self.show(profile, key)
            self.status.value = f"Profiled {self._name(key)}."
        except Exception as e:  # shown inline; the thread must not die silently
            self.status.value = ""
            self.messages.error(e)
        finally:
            self.profile_button.disabled = False

    def _name(self, key: str) -> str:
        return dict((k, n) for n, k in self.run.options).get(key, key)

    def show(self, profile, key: str) -> None:
        """The profile's tables and bar chart."""
        import html

        from wb_core.api import plots

        types = type_table(profile)
        layers = layer_table(profile)
        total = profile.total_ms
        self.result.children = [
            section("Time per layer type"),
            w.HTML(results_table(types, ["type", "layers", "time_ms", "share_pct", "precisions"])),
            PlotArea(plots.layer_type_stack(profile, TOP_TYPES)),
            caption(f"Each bar is the time one kind of layer took per inference, summed over its layers (sum of "
                    f"layer times: OpenVINO's per-layer counters, one inference at a time, so it leaves out the "
                    f"time between layers that the sweep's closed-loop throughput includes) "
                    f"({total:.3g} ms for all layers; the mean of {profile.iterations} inferences at batch "
                    f"{profile.batch_size}). The colour says which precision those layers executed in: a layer "
                    f"type that stays FP32 in an INT8 or BF16 run did not get the faster kernels."),
            section(f"The {len(layers)} slowest layers"),
            w.HTML(results_table(layers, ["name", "type", "executed_precision", "exec_type", "time_ms",
                                          "share_pct"])),
            w.HTML(f"<div class='wb-caption'>Layer names come from the model file; OpenVINO fuses some layers "
                   f"into others, so a model has fewer executed layers than it declares. Run "
                   f"<code>{html.escape(key)}</code>.</div>"),
        ]
