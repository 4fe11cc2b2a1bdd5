-- Argo CD health check for sits.dev/SitsDeployment (docs/gitops.md says how to install it:
-- argocd-cm, key resource.customizations.health.sits.dev_SitsDeployment).
--
-- Reads only what the operator writes (operator/sits_operator/core/status.py, kstatus.py):
--   metadata.generation above status.observedGeneration -> Progressing (spec not seen yet)
--   phase Paused                                         -> Suspended (sits.dev/resume)
--   Stalled True, or phase RolledBack, Invalid, Degraded -> Degraded
--   Reconciling True                                     -> Progressing
--   Ready True (Succeeded, or no rollout under way)      -> Healthy
-- status.message (what the rollout waits for) is the message in every case.
-- Written for Argo CD's Lua (gopher-lua, Lua 5.1); tests/unit/test_argocd_health.py runs it.

local hs = {}

local function condition(status, kind)
  if status.conditions == nil then
    return nil
  end
  for _, cond in ipairs(status.conditions) do
    if cond.type == kind then
      return cond
    end
  end
  return nil
end

local function holds(status, kind)
  local cond = condition(status, kind)
  return cond ~= nil and cond.status == "True"
end

local function said(status, fallback)
  if status.message ~= nil and status.message ~= "" then
    return status.message
  end
  return fallback
end

local status = obj.status
if status == nil or status.observedGeneration == nil then
  hs.status = "Progressing"
  hs.message = "waiting for the SITS operator to report a status"
  return hs
end

local generation = obj.metadata.generation
if generation ~= nil and status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = string.format(
    "waiting for the SITS operator to observe generation %d (status is of generation %d)",
    generation,
    status.observedGeneration
  )
  return hs
end

local phase = status.phase
if phase == "Paused" then
  hs.status = "Suspended"
  hs.message = said(status, "paused: waiting for sits.dev/resume")
  return hs
end

if holds(status, "Stalled") or phase == "RolledBack" or phase == "Invalid" or phase == "Degraded" then
  hs.status = "Degraded"
  local stalled = condition(status, "Stalled")
  local fallback = "stalled"
  if stalled ~= nil and stalled.message ~= nil and stalled.message ~= "" then
    fallback = stalled.message
  end
  hs.message = said(status, fallback)
  return hs
end

if holds(status, "Reconciling") then
  hs.status = "Progressing"
  hs.message = said(status, "rollout in progress")
  return hs
end

if holds(status, "Ready") then
  hs.status = "Healthy"
  hs.message = said(status, "ready")
  return hs
end

hs.status = "Progressing"
hs.message = said(status, "waiting for the SitsDeployment to become Ready")
return hs
