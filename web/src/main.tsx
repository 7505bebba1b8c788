import '@mantine/core/styles.css';
import { createTheme, MantineProvider, type CSSVariablesResolver } from '@mantine/core';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { loadConfig } from './api/client';
import { App } from './App';

// WCAG AA contrast (axe checks it in the browser tests): white on blue.8 and dimmed text on gray.7,
// where Mantine's defaults (blue.6, gray.6) fall short of 4.5:1.
// autoContrast: black or white text on filled badges and buttons, whichever reads better.
const theme = createTheme({ primaryShade: { light: 8, dark: 8 }, autoContrast: true });
const contrast: CSSVariablesResolver = (t) => ({
  variables: {},
  light: { '--mantine-color-dimmed': t.colors.gray[7]! },
  dark: {},
});

await loadConfig();
createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <MantineProvider defaultColorScheme="light" theme={theme} cssVariablesResolver={contrast}>
      <App />
    </MantineProvider>
  </StrictMode>,
);
