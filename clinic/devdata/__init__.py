"""Development data of the organisation, kept out of the domain modules: the scale branches, departments
and doctors of `generate_scale_data`, and the COPY plumbing every app's scale generator shares (scale.py)."""
