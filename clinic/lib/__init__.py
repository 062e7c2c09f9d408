"""What several apps share and none owns: the PDF toolkit, GST tax arithmetic, amounts in Indian numbering
and the representation markers. No models, and no import of a domain app: every app may use them, so they
depend on none."""
