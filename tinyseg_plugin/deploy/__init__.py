"""Deployment: TinySeg installed into TFLM trees and forks, and the host end of remote spilling.
Imports nothing of the package but errors.py."""
