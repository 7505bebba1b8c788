import { Alert, Button, Center, Loader, Stack, Table, Text } from '@mantine/core';
import { useCallback, useEffect, useState, type ReactNode } from 'react';

/**
 * A form's action: `busy` while `run(fn)` runs, and the message of the error it threw (cleared when it
 * runs again) for the form to show.
 */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string>();
  const run = useCallback(async (fn: () => Promise<void>) => {
    setBusy(true);
    setError(undefined);
    try {
      await fn();
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, setError, run };
}

/**
 * A list page's table: striped, scrolling sideways below `minWidth`, named for screen readers by
 * `label`, one header per column; `children` are its rows.
 */
export function DataTable({
  label,
  minWidth,
  hover,
  columns,
  children,
}: {
  label: string;
  minWidth: number;
  hover?: boolean;
  columns: string[];
  children: ReactNode;
}) {
  return (
    <Table.ScrollContainer minWidth={minWidth}>
      <Table striped highlightOnHover={hover ?? false} aria-label={label}>
        <Table.Thead>
          <Table.Tr>
            {columns.map((c) => (
              <Table.Th key={c}>{c}</Table.Th>
            ))}
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>{children}</Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}

/** A form's error message, announced to screen readers (nothing while there is none). */
export function FormError({ error }: { error: string | undefined }) {
  return error ? (
    <Alert color="red" role="alert">
      {error}
    </Alert>
  ) : null;
}

/** Loads `fn` on mount and on `reload()`; pages render its three states with <Loadable>. */
export function useLoad<T>(fn: () => Promise<T>, deps: unknown[] = []) {
  const [state, setState] = useState<{ data?: T; error?: Error; loading: boolean }>({ loading: true });
  const [tick, setTick] = useState(0);
  // biome-ignore lint/correctness/useExhaustiveDependencies: useLoad's callers list what `fn` reads in `deps`
  const run = useCallback(fn, deps);
  // biome-ignore lint/correctness/useExhaustiveDependencies: `tick` is the reload trigger: reload() bumps it to load again
  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    run().then(
      (data) => live && setState({ data, loading: false }),
      (error: Error) => live && setState({ error, loading: false }),
    );
    return () => {
      live = false;
    };
  }, [run, tick]);
  return { ...state, reload: () => setTick((t) => t + 1) };
}

export function ErrorState({ error, onRetry }: { error: Error; onRetry?: () => void }) {
  return (
    <Alert color="red" title="Could not load" role="alert">
      <Stack gap="xs" align="flex-start">
        <Text size="sm">{error.message}</Text>
        {onRetry && (
          <Button size="xs" variant="light" color="red" onClick={onRetry}>
            Retry
          </Button>
        )}
      </Stack>
    </Alert>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return (
    <Text c="dimmed" ta="center" py="lg">
      {children}
    </Text>
  );
}

export function Loading({ label }: { label: string }) {
  return (
    <Center py="lg" aria-busy="true">
      <Loader size="sm" aria-label={label} />
    </Center>
  );
}

/** The loading / error / empty / loaded switch every page uses. */
export function Loadable<T>({
  state,
  label,
  isEmpty,
  empty,
  children,
}: {
  state: ReturnType<typeof useLoad<T>>;
  label: string;
  isEmpty?: (d: T) => boolean;
  empty?: ReactNode;
  children: (d: T) => ReactNode;
}) {
  if (state.error) return <ErrorState error={state.error} onRetry={state.reload} />;
  if (state.data === undefined) return <Loading label={label} />;
  if (isEmpty?.(state.data)) return <Empty>{empty}</Empty>;
  return <>{children(state.data)}</>;
}

export const fmtDate = (s: string | null | undefined) => (s ? new Date(s).toLocaleString() : '—');
export const usd = (n: number | null | undefined) =>
  n === null || n === undefined ? 'unlimited' : `$${n.toFixed(n !== 0 && Math.abs(n) < 0.01 ? 6 : 2)}`;
