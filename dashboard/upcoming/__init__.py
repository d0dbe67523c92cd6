"""The upcoming-fires page: the next 24 hours of fires beside the pools' capacity."""
