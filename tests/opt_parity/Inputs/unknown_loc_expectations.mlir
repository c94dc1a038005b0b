// Expectations at an unknown location.




// expected-error @unknown {{Local crash reproduction may not be used without disabling mutli-threading first.}}
// expected-remark @unknown {{a remark nobody emits}}
