"""The DICOM Modality Worklist channel: C-FIND over the scheduled imaging items, MPPS moving their status,
C-ECHO; for the calling AE titles allowed in the admin, from their addresses."""
