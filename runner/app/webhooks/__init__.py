"""The operator's webhook server: admission and conversion over HTTPS, its certificates and the
objects that send the API server to it, served on serving's bind addresses and TLS files."""
