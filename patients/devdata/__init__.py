"""Development data of the patients app, kept out of the domain modules: the demo patients of `seed_demo`
and the benchmarks (demo.py), and the scale patients of `generate_scale_data` (scale.py, scale_names.py)."""
