"""Dynamic Resource Allocation, as the engine reads it: the API's names (``api``), the GPU
asks of claims and templates (``claims``), the claims a pod names resolved
(``pod_claims``), the claim objects judged on their own (``claim_objects``), the
ResourceSlices that count now (``resource_slices``) and what each pool offers through them
(``capacity``). The kube and offline wings read the same objects by the names of ``api``.
"""
