"""Parquet corpus IO, vocabularies, text preparation and atomic output."""
