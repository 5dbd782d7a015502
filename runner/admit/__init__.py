"""Admission: the API server's AdmissionReviews answered by a watch's `validate:` or `mutate:`
role or playbook, a flow beside reconcile (review -> extra vars -> a quick run with read-only
API access -> the role's answer -> the AdmissionReview's response; admitter.py), and the
webhooks that send the API server here (configurations.py)."""
