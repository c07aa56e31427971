"""The Qt-free host the desktop main process and the CLI share: settings, the safety inspector,
the Safe resume seam, the host services over the store and their ``HostServices`` port (composed
here, handed to ``main_process``), transcript items, Safe resume verdicts and Locate folder. It
imports neither Qt nor ``main_process`` nor ``renderer``."""
