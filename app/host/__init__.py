"""The Qt-free host the desktop main process and the CLI share: settings, the safety inspector,
the Safe resume seam and the host services over the store (composed here, handed to
``main_process`` as its ``HostServices`` port)."""
