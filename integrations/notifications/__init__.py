"""Patient notifications (SMS and e-mail): settings per branch, the send with its attempt log, the SMS backends."""
