"""The alerts page and the firing alerts' banner every page shows."""
