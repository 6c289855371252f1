//! What tests read and change of Zero Trust Access behind the API's back: the organization,
//! the applications and policies as stored, an application made by someone else.
use super::access_state::{SimAccessApp, SimAccessOrganization, SimAccessPolicy};
use super::state::now;
use super::{Simulator, handlers};

impl Simulator {
    /// The account's Zero Trust organization; `None` without a team.
    pub fn access_organization(&self) -> Option<SimAccessOrganization> {
        self.lock().access.organization.clone()
    }

    /// Gives the account a Zero Trust organization for `team` (kept as it is when it already
    /// has that team), or takes it away with `None`: the Access calls are then refused while
    /// the applications and policies stay stored, reachable again once a team is back.
    pub fn set_access_team(&self, team: Option<String>) {
        let mut state = self.lock();
        let organization = &mut state.access.organization;
        match team {
            Some(team) if organization.as_ref().is_some_and(|o| o.name == team) => {}
            Some(team) => *organization = Some(SimAccessOrganization::for_team(&team, now())),
            None => *organization = None,
        }
    }

    /// The account's Access applications, in creation order.
    pub fn access_apps(&self) -> Vec<SimAccessApp> {
        self.lock().access.apps.clone()
    }

    /// The account's reusable Access policies, in creation order.
    pub fn access_policies(&self) -> Vec<SimAccessPolicy> {
        self.lock().access.policies.clone()
    }

    /// Stores an application nobody created through this API (someone else's, made in the
    /// dashboard), checked with the create's rules but without a call: no counter, fault or
    /// organization check. `app` is a create body (`{"type": "self_hosted", "domain": …}`);
    /// `None` when it fails those rules.
    pub fn put_access_app(&self, app: serde_json::Value) -> Option<SimAccessApp> {
        let body = app.as_object()?;
        handlers::insert_access_app(&mut self.lock(), body).ok()
    }
}
