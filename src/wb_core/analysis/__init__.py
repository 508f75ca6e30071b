"""Reading results: efficiency, Pareto front and recommendation (recommend.py), instance planning
and capacity (planning.py), per-layer profiles (layers.py), FLOPs (flops.py, study_model.py)."""
