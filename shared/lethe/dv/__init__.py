"""Deletion vectors: the blob format, their storage, and rows removed or moved by them."""
