"""Diagnosis and verdict policy: what a measured error means (hints, patterns, error statistics)
and what turns a row red (policy: each check and cause to fail, warn or information).
May import: no other room of checks/ (only gradlab.model, results, tolerances; torch, numpy).
"""
