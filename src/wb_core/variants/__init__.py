"""Model variants: conversion to OpenVINO IR (convert.py), INT8 by NNCF (quantize.py), and the
planner that gives each precision its variant and accuracy (planner.py)."""
