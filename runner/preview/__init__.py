"""`operator-runner preview` and `check-roles`: what a candidate (another ansible-core line, new
roles, a new image) would do to every live CR, in check mode and with nothing written.

A flow of its own beside control, admit and convert: the app runs each CR's reconcile in check
mode through the preview's proxy (runner/dependents/previewproxy.py); this package turns each
run into a verdict (outcome.py: unchanged, changed with its diff, failed with its task), names
the failures a known ansible-core change explains (porting.py), prints the report (report.py),
and scans roles for those changes without running them (rolescan.py).
"""
