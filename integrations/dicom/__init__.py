"""The DICOM Modality Worklist channel (CONTRACT section 17): C-FIND over the scheduled imaging items, MPPS
moving their status, C-ECHO; for the calling AE titles allowed in the admin."""
