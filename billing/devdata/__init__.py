"""Development data of the billing app, kept out of the domain modules: the demo catalogue and invoices of
`seed_demo` (demo.py) and the scale catalogue and invoices of `generate_scale_data` (scale.py)."""
