"""What the cluster offers now, one model however GPUs are reached: per pool and GPU
model, the largest node and the total of each offer (``offers``), read from the nodes'
allocatable extended resources (``now``, the device plugin's ``nvidia.com/gpu`` and
``nvidia.com/mig-*``) and from their ResourceSlices (``webhook.engine.dra.capacity``)."""
