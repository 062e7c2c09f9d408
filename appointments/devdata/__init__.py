"""Development data of the appointments app, kept out of the domain modules: the demo schedule of
`seed_demo` (demo.py) and the scale sessions and appointments of `generate_scale_data` (scale.py)."""
