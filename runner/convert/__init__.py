"""Conversion: the API server's ConversionReviews answered by a watch's `convert:`, a flow beside
reconcile (review -> the declarative field map, or extra vars -> a quick run of the convert role
-> its answers -> the ConversionReview's response; converter.py).

review.py (the ConversionReview read and answered, answers checked), fieldmap.py (`fields:`),
requestvars.py (a run's extra vars), converter.py (Converter, per watch; Conversions, the
`/convert` webhook's handler).
"""
