import { Mark, Text, Tooltip } from '@mantine/core';
import type { ReactNode } from 'react';

export type Span = { text: string; label: string; score?: number; start: number; end: number };

const palette = ['yellow', 'cyan', 'lime', 'grape', 'orange', 'pink', 'teal', 'indigo'];

/** The text with each entity span marked (offsets are code points, as the API returns them); a span without a score is a person's correction. */
export function Highlighted({ text, spans, labels }: { text: string; spans: Span[]; labels: string[] }) {
  const chars = Array.from(text);
  const parts: ReactNode[] = [];
  let at = 0;
  for (const [i, s] of spans.entries()) {
    if (s.start < at) continue; // overlapping spans: the first one wins in the text, all are in the table
    parts.push(chars.slice(at, s.start).join(''));
    const color = palette[Math.max(0, labels.indexOf(s.label)) % palette.length];
    const score = s.score === undefined ? '' : `, score ${s.score.toFixed(3)}`;
    parts.push(
      <Tooltip key={i} label={`${s.label}${s.score === undefined ? '' : ` · ${s.score.toFixed(3)}`}`}>
        <Mark color={color} px={2} tabIndex={0} aria-label={`${s.text}: ${s.label}${score}`}>
          {chars.slice(s.start, s.end).join('')}
          <Text span size="xs" fw={700} ml={4}>
            {s.label}
            {s.score === undefined ? '' : ` ${s.score.toFixed(2)}`}
          </Text>
        </Mark>
      </Tooltip>,
    );
    at = s.end;
  }
  parts.push(chars.slice(at).join(''));
  return (
    <Text style={{ whiteSpace: 'pre-wrap', lineHeight: 2 }} data-testid="highlighted-text">
      {parts}
    </Text>
  );
}
