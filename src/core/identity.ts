/**
 * Who a request acts for: the caller and its team. Types only, importing nothing, so that the
 * members of `Services` (context.ts) can name them without an import cycle back through it.
 */
/** Who is calling: resolved from the API key or session token on every authenticated request. */
export interface Principal {
  team_id: string;
  key_id: string;
  /** operator: the installation's bootstrap key (manages teams); admin: manages its team's keys. */
  role: 'operator' | 'admin' | 'member';
  via: 'api_key' | 'session';
}

export type Plan = 'free' | 'pro' | 'research' | 'custom';

/** A team as the API shows it (USD). */
export interface Team {
  id: string;
  name: string;
  plan: Plan;
  /** USD per UTC day; null means no cap. */
  daily_spend_cap_usd: number | null;
  /** Remaining prepaid credit in USD; null means billed in arrears (no credit limit). */
  credit_balance_usd: number | null;
  /** The encoder `POST /gliner-2` runs when the request names none; null: the operator's default. */
  default_encoder: string | null;
  created_at: string;
}
