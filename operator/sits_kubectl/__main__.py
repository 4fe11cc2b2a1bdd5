"""`python -m sits_kubectl`: the same as the `kubectl-sits` executable."""

from sits_kubectl.app import main

raise SystemExit(main())
